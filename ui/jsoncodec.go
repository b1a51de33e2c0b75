package ui

import (
	"bytes"
	"errors"
	"math"
	"strconv"

	jsoniter "github.com/json-iterator/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	apiv1 "github.com/prometheus/prometheus/web/api/v1"
)

// matrixCodec is Prometheus' JSON codec (apiv1.JSONCodec) with a faster
// writer for the answer a dashboard asks for most: a query_range matrix
// of float points. Prometheus writes each point through json-iterator's
// stream, a timestamp as two integers and a value by strconv.AppendFloat;
// on a 1-hour chart of 18 series that was as much CPU as the query itself.
// This one appends straight to one buffer, an integral value as an
// integer (the digits AppendFloat gives it), and leaves everything else
// (labels, stats, warnings, every other kind of answer, native
// histograms) to JSONCodec, so the bytes are the same: TestMatrixCodec
// compares them with JSONCodec's for random matrices.
type matrixCodec struct{ apiv1.JSONCodec }

// resultSlot is where an empty matrix sits in JSONCodec's encoding of a
// query answer; the matrix is written there. It comes first: before it
// is only `{"status":"success","data":{"resultType":"matrix",`.
var resultSlot = []byte(`"result":[]`)

func (c matrixCodec) Encode(resp *apiv1.Response) ([]byte, error) {
	var qd apiv1.QueryData
	switch d := resp.Data.(type) {
	case *apiv1.QueryData:
		qd = *d
	case apiv1.QueryData:
		qd = d
	default:
		return c.JSONCodec.Encode(resp)
	}
	m, ok := qd.Result.(promql.Matrix)
	if !ok || len(m) == 0 || hasHistograms(m) {
		return c.JSONCodec.Encode(resp)
	}
	qd.Result = promql.Matrix{}
	rest := *resp
	rest.Data = &qd
	frame, err := c.JSONCodec.Encode(&rest)
	if err != nil {
		return nil, err
	}
	at := bytes.Index(frame, resultSlot)
	if at < 0 {
		return nil, errors.New("encode matrix: no result in the answer's frame")
	}
	at += len(resultSlot) - 1 // at the ']'
	out := make([]byte, 0, len(frame)+matrixSize(m))
	out = append(out, frame[:at]...)
	out = appendMatrix(out, m)
	out = append(out, frame[at+1:]...)
	return out, nil
}

func hasHistograms(m promql.Matrix) bool {
	for _, s := range m {
		if len(s.Histograms) > 0 {
			return true
		}
	}
	return false
}

// matrixSize guesses the encoded size of m's points, to allocate once.
func matrixSize(m promql.Matrix) int {
	n := 0
	for _, s := range m {
		n += 64 + 24*len(s.Floats)
	}
	return n
}

// appendMatrix appends the matrix's series without the opening '[',
// and the closing ']', as Prometheus' unsafeMarshalMatrixJSON writes them.
func appendMatrix(b []byte, m promql.Matrix) []byte {
	stream := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer func() {
		stream.SetBuffer(nil) // the pool keeps the stream, not the answer
		jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(stream)
	}()
	var stamps timestamps
	for i, s := range m {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":`...)
		b = appendLabels(b, stream, s.Metric)
		if len(s.Floats) > 0 {
			b = append(b, `,"values":[`...)
			for j, p := range s.Floats {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				b = stamps.append(b, j, p.T)
				b = append(b, ',', '"')
				b = appendValue(b, p.F)
				b = append(b, '"', ']')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendLabels is Prometheus' marshalLabelsJSON: names and values are
// escaped by json-iterator's WriteString, as there.
func appendLabels(b []byte, stream *jsoniter.Stream, ls labels.Labels) []byte {
	stream.SetBuffer(b)
	stream.WriteObjectStart()
	i := 0
	ls.Range(func(l labels.Label) {
		if i > 0 {
			stream.WriteMore()
		}
		i++
		stream.WriteString(l.Name)
		stream.WriteRaw(`:`)
		stream.WriteString(l.Value)
	})
	stream.WriteObjectEnd()
	return stream.Buffer()
}

// timestamps keeps the encoded timestamps of the points of the series
// before, by index: a range query's series mostly share its steps.
type timestamps struct {
	t   []int64
	end []int // enc[end[j-1]:end[j]] encodes t[j]
	enc []byte
}

// append appends the encoding of t, the timestamp of point j.
func (c *timestamps) append(b []byte, j int, t int64) []byte {
	if j < len(c.t) && c.t[j] == t {
		from := 0
		if j > 0 {
			from = c.end[j-1]
		}
		return append(b, c.enc[from:c.end[j]]...)
	}
	n := len(b)
	b = appendTimestamp(b, t)
	if j == len(c.t) { // the first series to reach index j
		c.t = append(c.t, t)
		c.enc = append(c.enc, b[n:]...)
		c.end = append(c.end, len(c.enc))
	}
	return b
}

// appendTimestamp is jsonutil.MarshalTimestamp: seconds, and the
// milliseconds as three digits after a point when there are any.
func appendTimestamp(b []byte, t int64) []byte {
	if t < 0 {
		b = append(b, '-')
		t = -t
	}
	b = strconv.AppendInt(b, t/1000, 10)
	if frac := t % 1000; frac != 0 {
		b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	}
	return b
}

// maxExactInt bounds the values appendValue writes as integers: below
// 2^53 every integer is a float64 and the shortest decimal that reads
// back as it is its own digits, which is what AppendFloat's 'f' format
// prints.
const maxExactInt = 1 << 53

// appendValue is jsonutil.MarshalFloat without the quotes: the shortest
// decimal, in exponent form below 1e-6 and from 1e21 on.
func appendValue(b []byte, f float64) []byte {
	if abs := math.Abs(f); abs < maxExactInt && f == math.Trunc(f) && (f != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, f, format, -1, 64)
}
