package cache

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// A stored value is an entry: a header line naming the entry format, the store key the
// entry belongs to, the CRC-32C of the payload and the payload's length, then the
// payload (the encoded response):
//
//	shardplan-entry/1 <key> <crc32c, 8 hex digits> <payload length>\n<payload>
//
// Cache seals every value it writes to a shared store and opens every value it reads
// from one (over an *LRU alone it keeps values as they are). An entry that does
// not open (another format, written under another key, truncated, altered, or not an
// entry at all) is a miss, counted in shardplan_cache_corrupt_entries_total by reason,
// and never served: the caller recomputes and overwrites it. Keys never contain spaces
// or newlines (a prefix, a version and a hex plan id).

// entryMagic names the entry format; change its version when the layout changes.
const entryMagic = "shardplan-entry/1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Reasons an entry does not open: the values of the reason label.
const (
	reasonFormat   = "format"   // no header, or another format version
	reasonKey      = "key"      // written under another key
	reasonLength   = "length"   // truncated or extended
	reasonChecksum = "checksum" // the payload changed
)

var corruptReasons = []string{reasonFormat, reasonKey, reasonLength, reasonChecksum}

// corruptError says why an entry did not open.
type corruptError struct{ reason string }

func (e *corruptError) Error() string { return "cache: corrupt entry (" + e.reason + ")" }

// seal wraps payload into an entry for key. It does not modify payload.
func seal(key string, payload []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(entryMagic) + len(key) + 32 + len(payload))
	b.WriteString(entryMagic)
	b.WriteByte(' ')
	b.WriteString(key)
	fmt.Fprintf(&b, " %08x %d\n", crc32.Checksum(payload, castagnoli), len(payload))
	b.Write(payload)
	return b.Bytes()
}

// open returns the payload of entry if it is a whole, unaltered entry of this format
// written under key, else a *corruptError. The payload aliases entry.
func open(key string, entry []byte) ([]byte, error) {
	nl := bytes.IndexByte(entry, '\n')
	if nl < 0 {
		return nil, &corruptError{reasonFormat}
	}
	fields := bytes.Split(entry[:nl], []byte{' '})
	if len(fields) != 4 || string(fields[0]) != entryMagic {
		return nil, &corruptError{reasonFormat}
	}
	if string(fields[1]) != key {
		return nil, &corruptError{reasonKey}
	}
	sum, err1 := strconv.ParseUint(string(fields[2]), 16, 32)
	n, err2 := strconv.Atoi(string(fields[3]))
	// Only the header seal writes opens: 8 lower-case hex digits and the length in
	// plain decimal (no upper case, sign or leading zeros).
	if err := errors.Join(err1, err2); err != nil || fmt.Sprintf("%08x", sum) != string(fields[2]) || strconv.Itoa(n) != string(fields[3]) {
		return nil, &corruptError{reasonFormat}
	}
	payload := entry[nl+1:]
	if len(payload) != n {
		return nil, &corruptError{reasonLength}
	}
	if crc32.Checksum(payload, castagnoli) != uint32(sum) {
		return nil, &corruptError{reasonChecksum}
	}
	return payload, nil
}
