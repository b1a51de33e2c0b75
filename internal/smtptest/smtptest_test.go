package smtptest

import (
	"net/smtp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSinkKeepsMails(t *testing.T) {
	s := NewSink(t)
	require.Empty(t, s.Mails())
	require.NoError(t, smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte("Subject: one\r\n\r\n.dot\r\n")))
	require.NoError(t, smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte("Subject: two\r\n\r\nbody\r\n")))
	require.Equal(t, []string{"Subject: one\r\n\r\n.dot\r\n", "Subject: two\r\n\r\nbody\r\n"}, s.Mails())
}
