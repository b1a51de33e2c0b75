package ui

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/storage"
)

func TestLabelLimitsCheck(t *testing.T) {
	f := func(l LabelLimits, ls labels.Labels, reason, msg string) {
		t.Helper()
		err := l.check(ls)
		if reason == "" {
			require.NoError(t, err)
			return
		}
		code, got := ingestError(err)
		require.Equal(t, http.StatusBadRequest, code)
		require.Equal(t, reason, got)
		require.Contains(t, err.Error(), msg)
	}
	ls := labels.FromStrings("__name__", "m", "a", "1", "long_label_name", strings.Repeat("v", 300))
	f(LabelLimits{}, ls, "", "")
	f(LabelLimits{Count: 3, NameLength: 15, ValueLength: 300}, ls, "", "")
	f(LabelLimits{Count: 2}, ls, rejectLabelLimit, "has 3 labels, more than label_limit 2")
	f(LabelLimits{NameLength: 10}, ls, rejectLabelNameLength, `label name "long_label_name" is 15 bytes, longer than label_name_length_limit 10`)
	f(LabelLimits{ValueLength: 100}, ls, rejectLabelValueLength, `is 300 bytes, longer than label_value_length_limit 100`)
	require.Less(t, len(LabelLimits{ValueLength: 100}.check(ls).Error()), 400, "the series is shown as a prefix")
}

func TestIngestErrorCodes(t *testing.T) {
	code, reason := ingestError(errors.Join(errors.New("x"), storage.ErrDiskFull))
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, rejectDiskFull, reason)
	code, reason = ingestError(storage.ErrInvalidSeries)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, rejectSeriesTooLarge, reason)
	code, _ = ingestError(errors.New("other"))
	require.Zero(t, code)
}
