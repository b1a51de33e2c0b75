package storage

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// VictoriaMetrics' lib/storage (v1.151.0, raw_row.go) copies the rows
// AddRows is given into its partition's shard buffer, allocated at 8 MiB
// (maxRawRowsPerShard, a constant) on the first row and kept for as long
// as the partition is open. A flush copies the shard's rows into a fresh
// 8 MiB buffer, makes an in-memory part of that and empties the shard,
// which keeps its buffer. The appliance writes each store in batches
// (the head's flush, a rollup pass) that DebugFlush follows at once, so a
// shard holds rows for milliseconds a minute, yet each of the three
// stores kept 8 MiB for it, and every flush allocated 8 MiB more: 24 MiB
// of a 37 MB live heap on the small box (README, issue 17).
//
// vmAddRows first gives the shard a buffer the size of the batch
// (vmSizeRawRows), and vmDebugFlush hands the shard's buffer itself to the
// flush, as VM does with a shard that fills (rawRowsShard.addRows puts the
// full buffer on rowssToFlush), and leaves the shard without one: a batch
// then costs a buffer of its own size, freed once the flush made a part
// of it, and no buffer stays. Neither the buffer's size nor its reuse is
// a setting of lib/storage, so the fields are reached by name
// through reflect; vmRawRowsCheck refuses a VictoriaMetrics whose types
// lack them (Open fails), and TestVMRawRowShards pins the version so that
// an upgrade re-reads raw_row.go.

// vmDebugFlush makes everything added to vm searchable (DebugFlush) after
// handing its shards' row buffers to that flush, so that none is kept.
func vmDebugFlush(vm *vmstorage.Storage) {
	vmReleaseRawRows(vm)
	vm.DebugFlush()
}

// vmAddRows is vm.AddRows(rows) into shard buffers sized for rows: each
// partition the rows fall in gets room for them (vmSizeRawRows) before
// lib/storage would allocate its 8 MiB buffer for the first of them.
func vmAddRows(vm *vmstorage.Storage, rows []vmstorage.MetricRow, precisionBits uint8) {
	vmSizeRawRows(vm, rows)
	vm.AddRows(rows, precisionBits)
}

// vmMaxRawRowsBytes is lib/storage's shard buffer (maxRawRowsPerShard
// rows): vmSizeRawRows allocates no more, a batch that needs more is left
// to lib/storage, which flushes a full buffer as a part of its own.
const vmMaxRawRowsBytes = 8 << 20

// vmSizeRawRows makes room for rows in the shard of each partition of vm
// they fall in, if it has too little: a buffer of what it holds and rows,
// at least twice its old size (as append grows), at most lib/storage's 8 MiB.
// lib/storage then copies the rows into that buffer instead of allocating
// 8 MiB for a batch of a few thousand rows (the head's flush, a rollup
// pass). Rows of a partition not created yet get lib/storage's own buffer,
// which vmDebugFlush releases.
func vmSizeRawRows(vm *vmstorage.Storage, rows []vmstorage.MetricRow) {
	if len(rows) == 0 {
		return
	}
	vmPartitions(vm, func(pt reflect.Value) {
		tr := vmField(pt, "tr").Interface().(vmstorage.TimeRange)
		n := 0
		for j := range rows {
			if t := rows[j].Timestamp; t >= tr.MinTimestamp && t <= tr.MaxTimestamp {
				n++
			}
		}
		shards := vmField(vmField(pt, "rawRows"), "shards")
		if n == 0 || shards.Len() != 1 {
			return // more shards: which one gets the rows is lib/storage's turn
		}
		shard := shards.Index(0)
		mu := vmMutex(vmField(shard, "mu"))
		mu.Lock()
		defer mu.Unlock()
		buf := vmField(shard, "rows")
		maxRows := vmMaxRawRowsBytes / int(buf.Type().Elem().Size())
		if need := buf.Len() + n; need > buf.Cap() && need <= maxRows {
			grown := reflect.MakeSlice(buf.Type(), buf.Len(), min(max(need, 2*buf.Cap()), maxRows))
			reflect.Copy(grown, buf)
			buf.Set(grown)
		}
	})
}

// vmReleaseRawRows moves every shard's rows, buffer and all, to its
// partition's rowssToFlush, where the next flush (DebugFlush, or VM's own
// 2 s timer) makes a part of them, and leaves the shard with no buffer:
// its next row allocates one (raw_row.go: rawRowsShard.addRows).
//
// Lock order as in lib/storage: the table's ptwsLock, then a shard's mu,
// then rowssToFlushLock (addRowsToFlush takes the last after the first
// two are released; nothing in lib/storage takes ptwsLock while holding
// either).
func vmReleaseRawRows(vm *vmstorage.Storage) {
	vmPartitions(vm, func(pt reflect.Value) {
		rrss := vmField(pt, "rawRows")
		shards := vmField(rrss, "shards")
		toFlushLock := vmMutex(vmField(rrss, "rowssToFlushLock"))
		toFlush := vmField(rrss, "rowssToFlush")
		for j := range shards.Len() {
			shard := shards.Index(j)
			mu := vmMutex(vmField(shard, "mu"))
			rows := vmField(shard, "rows")
			mu.Lock()
			held := reflect.New(rows.Type()).Elem()
			held.Set(rows)
			rows.SetZero()
			mu.Unlock()
			if held.Len() == 0 {
				continue // an empty buffer (VM's timer flushed it): dropped
			}
			toFlushLock.Lock()
			toFlush.Set(reflect.Append(toFlush, held))
			toFlushLock.Unlock()
		}
	})
}

// vmPartitions calls each with every partition of vm (lib/storage's
// partition struct, addressable), holding the table's ptwsLock.
func vmPartitions(vm *vmstorage.Storage, each func(pt reflect.Value)) {
	tb := vmField(reflect.ValueOf(vm).Elem(), "tb").Elem()
	ptwsLock := vmMutex(vmField(tb, "ptwsLock"))
	ptwsLock.Lock()
	defer ptwsLock.Unlock()
	ptws := vmField(tb, "ptws")
	for i := range ptws.Len() {
		each(vmField(ptws.Index(i).Elem(), "pt").Elem())
	}
}

// vmField is v's field name (promoted fields included), settable although
// unexported. v must be addressable.
func vmField(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// vmMutex is the sync.Mutex v holds.
func vmMutex(v reflect.Value) *sync.Mutex {
	return (*sync.Mutex)(unsafe.Pointer(v.UnsafeAddr()))
}

// vmRawRowsCheck fails unless lib/storage's types have the fields
// vmReleaseRawRows reaches, with the kinds it uses them as, so that a
// VictoriaMetrics upgrade that changed them stops Open instead of
// panicking in a flush or corrupting a store.
func vmRawRowsCheck() error {
	var errs []error
	// field is t's field name if t is a struct and the field's type
	// passes ok; nil (and an error) otherwise, or if t is nil already.
	field := func(t reflect.Type, name string, ok func(reflect.Type) bool) reflect.Type {
		if t == nil {
			return nil
		}
		if t.Kind() == reflect.Struct {
			if f, found := t.FieldByName(name); found && ok(f.Type) {
				return f.Type
			}
		}
		errs = append(errs, fmt.Errorf("%s has no field %s of the kind expected", t, name))
		return nil
	}
	elem := func(t reflect.Type) reflect.Type {
		if t == nil {
			return nil
		}
		return t.Elem()
	}
	isMutex := func(t reflect.Type) bool { return t == reflect.TypeFor[sync.Mutex]() }
	isStruct := func(t reflect.Type) bool { return t.Kind() == reflect.Struct }
	isPtrStruct := func(t reflect.Type) bool { return t.Kind() == reflect.Pointer && isStruct(t.Elem()) }
	isSliceOf := func(ok func(reflect.Type) bool) func(reflect.Type) bool {
		return func(t reflect.Type) bool { return t.Kind() == reflect.Slice && ok(t.Elem()) }
	}

	tb := elem(field(reflect.TypeFor[vmstorage.Storage](), "tb", isPtrStruct))
	field(tb, "ptwsLock", isMutex)
	ptw := elem(elem(field(tb, "ptws", isSliceOf(isPtrStruct))))
	pt := elem(field(ptw, "pt", isPtrStruct))
	field(pt, "tr", func(t reflect.Type) bool { return t == reflect.TypeFor[vmstorage.TimeRange]() })
	rrss := field(pt, "rawRows", isStruct)
	shard := elem(field(rrss, "shards", isSliceOf(isStruct)))
	field(shard, "mu", isMutex)
	rows := field(shard, "rows", isSliceOf(isStruct))
	field(rrss, "rowssToFlushLock", isMutex)
	field(rrss, "rowssToFlush", func(t reflect.Type) bool { return rows != nil && t == reflect.SliceOf(rows) })
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release VictoriaMetrics' row buffers: lib/storage's types changed (see storage/vmrawrows.go): %w", err)
	}
	return nil
}
