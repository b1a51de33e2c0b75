package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/encoding"
	"go.etcd.io/bbolt"
)

// Open checks what it can of the files it opens before VictoriaMetrics'
// and bbolt's own code reads them: VictoriaMetrics opens its parts in
// goroutines of its own and panics on a damaged file (logger.Panicf),
// which no recover in this package can catch, and bbolt faults on a page
// outside its file. Each check's error names the file and what to do.

// ErrDamaged is returned (wrapped) by Open when a file of the store is
// damaged; the message names the file and what to do.
var ErrDamaged = errors.New("damaged data file")

// checkStateFile refuses a missing or empty state file next to existing
// series data unless startFresh: bbolt would create a new, empty one, and
// the alert state, silences, the notification outbox and log kept there
// would be gone without a word.
func checkStateFile(statePath, root string, startFresh bool) error {
	fi, err := os.Stat(statePath)
	switch {
	case err == nil && fi.Size() > 0:
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("state file %s: %w", statePath, err)
	case startFresh:
		return nil
	}
	has, err := hasSeriesData(filepath.Join(root, "tsdb"))
	if err != nil || !has {
		return err
	}
	what := "is missing"
	if err == nil && fi != nil {
		what = "is empty (0 bytes)"
	}
	return fmt.Errorf("%w: state file %s %s, but %s holds series data; the alert state, silences and notification log kept there would start empty. "+
		"Restore %s from a backup, or start with --storage.start-fresh to accept an empty state",
		ErrDamaged, statePath, what, filepath.Join(root, "tsdb"), filepath.Base(statePath))
}

// hasSeriesData says whether any tier under tsdb has a part on disk.
func hasSeriesData(tsdb string) (bool, error) {
	for _, pattern := range []string{"*/data/small/*/*", "*/data/big/*/*", "*/data/indexdb/*/*"} {
		matches, err := filepath.Glob(filepath.Join(tsdb, pattern))
		if err != nil {
			return false, err
		}
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				return true, nil
			}
		}
	}
	return false, nil
}

// openState opens the bbolt state file and reads every bucket, key and
// value once, so that a damaged page is found now, as an error, rather
// than as a fault later in whichever goroutine touches it.
func openState(path string) (db *bbolt.DB, err error) {
	damaged := func(cause any) error {
		return fmt.Errorf("%w: state file %s is damaged (%v). Move it aside (mv %s %s.broken) and start with --storage.start-fresh "+
			"(the alert state, silences and notification log start empty), or restore it from a backup",
			ErrDamaged, path, cause, path, path)
	}
	// bbolt reads its file through mmap: a page past the end of a
	// truncated file is a fault, which this turns into a panic here.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			db, err = nil, damaged(r)
		}
	}()
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 && fi.Size() < 2*int64(os.Getpagesize()) {
		return nil, damaged(fmt.Sprintf("%d bytes, shorter than its two meta pages", fi.Size()))
	}
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("open state file %s: locked by another process; stop the other appliance using %s", path, filepath.Dir(path))
		}
		if errors.Is(err, bbolt.ErrInvalid) || errors.Is(err, bbolt.ErrChecksum) || errors.Is(err, bbolt.ErrVersionMismatch) {
			return nil, damaged(err)
		}
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	if err := walkState(db); err != nil {
		_ = db.Close()
		return nil, damaged(err)
	}
	return db, nil
}

// walkState reads every page reachable from the root, and checks that
// none lies past the end of the file.
func walkState(db *bbolt.DB) error {
	return db.View(func(tx *bbolt.Tx) error {
		size := tx.Size()
		var walk func(b *bbolt.Bucket) error
		walk = func(b *bbolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				if v != nil {
					return nil
				}
				nb := b.Bucket(k)
				if nb == nil {
					return fmt.Errorf("bucket %q unreadable", k)
				}
				return walk(nb)
			})
		}
		if fi, err := os.Stat(db.Path()); err == nil && fi.Size() < size {
			return fmt.Errorf("truncated: %d bytes of %d", fi.Size(), size)
		}
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			if err := walk(b); err != nil {
				return fmt.Errorf("bucket %q: %w", name, err)
			}
			return nil
		})
	})
}

// checkVMFiles checks the parts of the VictoriaMetrics storage at path:
// each partition's parts.json parses and names parts that exist, and each
// part's metadata.json parses and its metaindex.bin and index.bin agree
// with the sizes of its other files. It reads the indexes of every part
// (a small fraction of the data), not the data blocks.
func checkVMFiles(path string) error {
	for _, dir := range []string{"small", "big"} {
		parts, _ := filepath.Glob(filepath.Join(path, "data", dir, "*", "parts.json"))
		for _, pj := range parts {
			if dir == "big" {
				continue // VictoriaMetrics keeps the list in small/
			}
			if err := checkDataPartition(path, pj); err != nil {
				return err
			}
		}
	}
	parts, _ := filepath.Glob(filepath.Join(path, "data", "indexdb", "*", "parts.json"))
	legacy, _ := filepath.Glob(filepath.Join(path, "indexdb", "*", "parts.json"))
	for _, pj := range append(parts, legacy...) {
		if err := checkIndexPartition(pj); err != nil {
			return err
		}
	}
	return nil
}

// partError is the error for a damaged part: move it out of the store and
// take it off its partition's list, losing its rows.
func partError(part, partsJSON string, cause error) error {
	return fmt.Errorf("%w: part %s is damaged: %v. Move it out of the data directory (mv %s /somewhere/safe/) and remove %q from %s; "+
		"the appliance then serves everything else (the samples or index entries in that part are lost)",
		ErrDamaged, part, cause, part, filepath.Base(part), partsJSON)
}

func readPartsJSON(pj string, v any) error {
	data, err := os.ReadFile(pj)
	if err != nil {
		return fmt.Errorf("%w: read %s: %v", ErrDamaged, pj, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s is damaged (%v). Remove it (rm %s): VictoriaMetrics then lists the part directories it finds next to it",
			ErrDamaged, pj, err, pj)
	}
	return nil
}

func checkDataPartition(root, pj string) error {
	var names struct{ Small, Big []string }
	if err := readPartsJSON(pj, &names); err != nil {
		return err
	}
	month := filepath.Base(filepath.Dir(pj))
	for _, set := range []struct {
		dir   string
		names []string
	}{{"small", names.Small}, {"big", names.Big}} {
		for _, n := range set.names {
			part := filepath.Join(root, "data", set.dir, month, n)
			if err := checkDataPart(part); err != nil {
				return partError(part, pj, err)
			}
		}
	}
	return nil
}

func checkIndexPartition(pj string) error {
	var names []string
	if err := readPartsJSON(pj, &names); err != nil {
		return err
	}
	for _, n := range names {
		part := filepath.Join(filepath.Dir(pj), n)
		if err := checkIndexPart(part); err != nil {
			return partError(part, pj, err)
		}
	}
	return nil
}

// fileSizes returns the sizes of the named files of a part directory.
func fileSizes(part string, names ...string) (map[string]int64, error) {
	fi, err := os.Stat(part)
	if err != nil {
		return nil, fmt.Errorf("listed but missing on disk")
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("not a directory")
	}
	out := make(map[string]int64, len(names))
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(part, n))
		if err != nil {
			return nil, fmt.Errorf("%s missing", n)
		}
		out[n] = fi.Size()
	}
	return out, nil
}

// readMetadata parses a part's metadata.json into v and checks counts.
func readMetadata(part string, v any, counts func() (rows, blocks uint64)) error {
	data, err := os.ReadFile(filepath.Join(part, "metadata.json"))
	if err != nil {
		return fmt.Errorf("metadata.json: %v", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("metadata.json: %v", err)
	}
	if r, b := counts(); r == 0 || b == 0 {
		return fmt.Errorf("metadata.json: %d rows in %d blocks", r, b)
	}
	return nil
}

// readIndexBlock reads and decompresses one block of index.bin.
func readIndexBlock(f *os.File, size int64, off uint64, n uint32) ([]byte, error) {
	if off+uint64(n) > uint64(size) {
		return nil, fmt.Errorf("index.bin is %d bytes, its metaindex needs %d (truncated)", size, off+uint64(n))
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, int64(off)); err != nil {
		return nil, fmt.Errorf("index.bin: %v", err)
	}
	data, err := encoding.DecompressZSTD(nil, buf)
	if err != nil {
		return nil, fmt.Errorf("index.bin at %d: %v", off, err)
	}
	return data, nil
}

func readMetaindex(part string) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(part, "metaindex.bin"))
	if err != nil {
		return nil, fmt.Errorf("metaindex.bin: %v", err)
	}
	data, err := encoding.DecompressZSTD(nil, raw)
	if err != nil {
		return nil, fmt.Errorf("metaindex.bin: %v", err)
	}
	if len(data) == 0 {
		return nil, errors.New("metaindex.bin is empty")
	}
	return data, nil
}

// Sizes of VictoriaMetrics' lib/storage records (TSID: 24 bytes).
const (
	vmMetaindexRowSize  = 24 + 4 + 8 + 8 + 8 + 4
	vmBlockHeaderSize   = 24 + 8 + 8 + 8 + 8 + 8 + 4 + 4 + 4 + 2 + 3
	vmBlockHeaderOffset = 24 + 8 + 8 + 8 // to TimestampsBlockOffset
)

// checkDataPart checks a lib/storage part: timestamps.bin and values.bin
// hold every block its index names.
func checkDataPart(part string) error {
	sizes, err := fileSizes(part, "metadata.json", "metaindex.bin", "index.bin", "timestamps.bin", "values.bin")
	if err != nil {
		return err
	}
	var ph struct{ RowsCount, BlocksCount uint64 }
	if err := readMetadata(part, &ph, func() (uint64, uint64) { return ph.RowsCount, ph.BlocksCount }); err != nil {
		return err
	}
	mi, err := readMetaindex(part)
	if err != nil {
		return err
	}
	if len(mi)%vmMetaindexRowSize != 0 {
		return fmt.Errorf("metaindex.bin: %d bytes is not a whole number of rows", len(mi))
	}
	f, err := os.Open(filepath.Join(part, "index.bin"))
	if err != nil {
		return fmt.Errorf("index.bin: %v", err)
	}
	defer f.Close()
	var blocks uint64
	for ; len(mi) > 0; mi = mi[vmMetaindexRowSize:] {
		count := encoding.UnmarshalUint32(mi[24:])
		off := encoding.UnmarshalUint64(mi[24+4+8+8:])
		n := encoding.UnmarshalUint32(mi[24+4+8+8+8:])
		data, err := readIndexBlock(f, sizes["index.bin"], off, n)
		if err != nil {
			return err
		}
		if len(data) != int(count)*vmBlockHeaderSize {
			return fmt.Errorf("index.bin at %d: %d bytes for %d block headers", off, len(data), count)
		}
		for ; len(data) > 0; data = data[vmBlockHeaderSize:] {
			h := data[vmBlockHeaderOffset:]
			tsOff, vOff := encoding.UnmarshalUint64(h), encoding.UnmarshalUint64(h[8:])
			tsN, vN := encoding.UnmarshalUint32(h[16:]), encoding.UnmarshalUint32(h[20:])
			if end := tsOff + uint64(tsN); end > uint64(sizes["timestamps.bin"]) {
				return fmt.Errorf("timestamps.bin is %d bytes, its index needs %d (truncated)", sizes["timestamps.bin"], end)
			}
			if end := vOff + uint64(vN); end > uint64(sizes["values.bin"]) {
				return fmt.Errorf("values.bin is %d bytes, its index needs %d (truncated)", sizes["values.bin"], end)
			}
			blocks++
		}
	}
	if blocks != ph.BlocksCount {
		return fmt.Errorf("index.bin lists %d blocks, metadata.json %d", blocks, ph.BlocksCount)
	}
	return nil
}

// checkIndexPart checks a lib/mergeset part (the series index): items.bin
// and lens.bin hold every block its index names.
func checkIndexPart(part string) error {
	sizes, err := fileSizes(part, "metadata.json", "metaindex.bin", "index.bin", "items.bin", "lens.bin")
	if err != nil {
		return err
	}
	var ph struct{ ItemsCount, BlocksCount uint64 }
	if err := readMetadata(part, &ph, func() (uint64, uint64) { return ph.ItemsCount, ph.BlocksCount }); err != nil {
		return err
	}
	mi, err := readMetaindex(part)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(part, "index.bin"))
	if err != nil {
		return fmt.Errorf("index.bin: %v", err)
	}
	defer f.Close()
	short := errors.New("metaindex.bin: a row is cut short")
	var blocks uint64
	for len(mi) > 0 {
		_, n := encoding.UnmarshalBytes(mi)
		if n <= 0 || len(mi) < n+16 {
			return short
		}
		mi = mi[n:]
		count := encoding.UnmarshalUint32(mi)
		off := encoding.UnmarshalUint64(mi[4:])
		size := encoding.UnmarshalUint32(mi[12:])
		mi = mi[16:]
		data, err := readIndexBlock(f, sizes["index.bin"], off, size)
		if err != nil {
			return err
		}
		for range count {
			for range 2 { // commonPrefix, firstItem
				_, n := encoding.UnmarshalBytes(data)
				if n <= 0 {
					return fmt.Errorf("index.bin at %d: a block header is cut short", off)
				}
				data = data[n:]
			}
			if len(data) < 1+4+8+8+4+4 {
				return fmt.Errorf("index.bin at %d: a block header is cut short", off)
			}
			h := data[1+4:]
			itemsOff, lensOff := encoding.UnmarshalUint64(h), encoding.UnmarshalUint64(h[8:])
			itemsN, lensN := encoding.UnmarshalUint32(h[16:]), encoding.UnmarshalUint32(h[20:])
			data = data[1+4+8+8+4+4:]
			if end := itemsOff + uint64(itemsN); end > uint64(sizes["items.bin"]) {
				return fmt.Errorf("items.bin is %d bytes, its index needs %d (truncated)", sizes["items.bin"], end)
			}
			if end := lensOff + uint64(lensN); end > uint64(sizes["lens.bin"]) {
				return fmt.Errorf("lens.bin is %d bytes, its index needs %d (truncated)", sizes["lens.bin"], end)
			}
			blocks++
		}
	}
	if blocks != ph.BlocksCount {
		return fmt.Errorf("index.bin lists %d blocks, metadata.json %d", blocks, ph.BlocksCount)
	}
	return nil
}

// checkTiers runs checkVMFiles on every tier directory under root.
func checkTiers(root string) error {
	for _, t := range []Tier{TierRaw, Tier1m, Tier5m} {
		dir := filepath.Join(root, "tsdb", t.String())
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if err := checkVMFiles(dir); err != nil {
			return err
		}
	}
	return nil
}
