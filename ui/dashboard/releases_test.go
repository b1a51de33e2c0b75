package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/storage/storagetest"
)

// TestReleaseDetector: a new value of a target's version label, and a
// new process start of a target without one, are recorded once each as
// releases in the state file; the first look only sets the baseline,
// python_info's version and the appliance's own restart are no release, and a new detector over the same
// state (a restart) records nothing again.
func TestReleaseDetector(t *testing.T) {
	db := storagetest.Open(t)
	store, err := NewAnnotationStore(db.State())
	require.NoError(t, err)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
	clk := clock.NewFake(t0)
	newDetector := func() *ReleaseDetector {
		return &ReleaseDetector{Engine: query.New(query.Options{}, nil, nil), Queryable: db, Store: store, Now: clk.Now}
	}
	det := newDetector()
	push := func(at time.Time, tritonVersion string, tritonStart, vllmStart time.Time, python string) {
		t.Helper()
		app := db.Appender(context.Background())
		ms := at.UnixMilli()
		for _, s := range []struct {
			ls labels.Labels
			v  float64
		}{
			{labels.FromStrings("__name__", "nv_inference_count", "job", "triton", "instance", "a", "model", "resnet", "version", tritonVersion), 10},
			{labels.FromStrings("__name__", "process_start_time_seconds", "job", "triton", "instance", "a"), float64(tritonStart.Unix())},
			{labels.FromStrings("__name__", "vllm:num_requests_running", "job", "vllm", "instance", "b", "model_name", "llama"), 1},
			{labels.FromStrings("__name__", "process_start_time_seconds", "job", "vllm", "instance", "b"), float64(vllmStart.Unix())},
			{labels.FromStrings("__name__", "python_info", "job", "vllm", "instance", "b", "version", python), 1},
			// The appliance's own process restarts with vLLM's: no release.
			{labels.FromStrings("__name__", "process_start_time_seconds", "job", "appliance", "instance", "self"), float64(vllmStart.Unix())},
		} {
			_, err := app.Append(0, s.ls, ms, s.v)
			require.NoError(t, err)
		}
		require.NoError(t, app.Commit())
		db.Flush()
	}
	boot := t0.Add(-24 * time.Hour)
	push(t0, "1", boot, boot, "3.12.11")
	rs, err := det.Detect(context.Background())
	require.NoError(t, err)
	require.Empty(t, rs, "the first look sets the baseline")

	t1 := t0.Add(time.Minute)
	clk.Set(t1)
	push(t1, "1", boot, boot, "3.12.11")
	rs, err = det.Detect(context.Background())
	require.NoError(t, err)
	require.Empty(t, rs)

	// Triton restarts with version 2 at t1+20s; vLLM restarts at t1+40s;
	// Python is upgraded (not a release of the model).
	t2 := t1.Add(time.Minute)
	clk.Set(t2)
	push(t2, "2", t1.Add(20*time.Second), t1.Add(40*time.Second), "3.12.12")
	rs, err = det.Detect(context.Background())
	require.NoError(t, err)
	require.Len(t, rs, 2, "%+v", rs)
	require.Equal(t, "release: triton a resnet 2 (was 1)", rs[0].Text)
	require.Equal(t, float64(t1.Add(20*time.Second).Unix()), rs[0].Time, "at the process start")
	require.Equal(t, map[string]string{"job": "triton", "instance": "a", "model": "resnet", "version": "2", "previous_version": "1"}, rs[0].Labels)
	require.Equal(t, []string{TagRelease}, rs[0].Tags)
	require.Equal(t, KindRelease, rs[0].Kind)
	require.Equal(t, "release: vllm b restarted (process start changed; no version label)", rs[1].Text)
	require.Equal(t, float64(t1.Add(40*time.Second).Unix()), rs[1].Time)
	require.Equal(t, []string{TagRelease, KindRestart}, rs[1].Tags)

	// A restart of the appliance: a new detector over the same state.
	clk.Set(t2.Add(30 * time.Second))
	rs, err = newDetector().Detect(context.Background())
	require.NoError(t, err)
	require.Empty(t, rs, "recorded once")

	list, err := store.List(t0, t2.Add(time.Minute), TagRelease)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.NotEmpty(t, list[0].ID)
	require.NotEqual(t, list[0].ID, list[1].ID)
	list, err = store.List(t0, t1)
	require.NoError(t, err)
	require.Empty(t, list, "outside the range")
}

// TestAnnotationValidate refuses what a deploy script may get wrong, with
// the reason.
func TestAnnotationValidate(t *testing.T) {
	ok := Annotation{Time: 1764590400, Text: " deploy v2 ", Tags: []string{"release"}, Labels: map[string]string{"model_name": "llama"}}
	require.NoError(t, ok.Validate())
	require.Equal(t, KindRelease, ok.Kind)
	require.Equal(t, ok.Time, ok.End)
	require.Equal(t, "deploy v2", ok.Text)
	note := Annotation{Time: 1764590400, Text: "maintenance"}
	require.NoError(t, note.Validate())
	require.Equal(t, KindNote, note.Kind)
	require.NotNil(t, note.Labels)

	for _, c := range []struct {
		a    Annotation
		want string
	}{
		{Annotation{Text: "x"}, "time is required"},
		{Annotation{Time: 10, End: 5, Text: "x"}, "end must not be before time"},
		{Annotation{Time: 10}, "text is required"},
		{Annotation{Time: 10, Text: "x", Tags: []string{"a b"}}, `tag "a b"`},
		{Annotation{Time: 10, Text: "x", Labels: map[string]string{"a-b": "1"}}, `label name "a-b"`},
		{Annotation{Time: 10, Text: "x", Kind: "alert"}, `kind "alert"`},
	} {
		err := c.a.Validate()
		require.ErrorIs(t, err, ErrBadAnnotation)
		require.ErrorContains(t, err, c.want)
	}
}
