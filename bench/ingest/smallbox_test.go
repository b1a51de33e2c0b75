package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRSSSplit(t *testing.T) {
	status := "Name:\tappliance\nVmHWM:\t  149024 kB\nVmRSS:\t  140300 kB\nRssAnon:\t   86392 kB\nRssFile:\t   53908 kB\nRssShmem:\t       0 kB\n"
	anon, file, err := parseRSSSplit([]byte(status))
	require.NoError(t, err)
	require.Equal(t, uint64(86392<<10), anon)
	require.Equal(t, uint64(53908<<10), file)

	_, _, err = parseRSSSplit([]byte("Name:\tx\nVmRSS:\t 1 kB\n"))
	require.Error(t, err)
	_, _, err = parseRSSSplit([]byte("RssAnon:\tlots kB\nRssFile:\t1 kB\n"))
	require.Error(t, err)

	// This process's own figures parse.
	anon, file, err = readRSSSplit(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, anon)
	require.Positive(t, file)
}
