// Package smtptest gives tests a minimal SMTP server on a free loopback
// port that keeps the mails it is given, for checking what a component
// sends by email without a real mail server.
//
// # Caveats
//
// It speaks just enough SMTP for net/smtp's plain client: no TLS, no
// authentication, and every recipient is accepted.
package smtptest
