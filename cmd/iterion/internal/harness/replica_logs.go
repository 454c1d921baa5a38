package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// logRecords reads the JSON lines of the replica log at path and decodes
// into a T each record whose msg is msg; other lines (other records, a
// panic's trace) are skipped. A line that names msg but does not decode
// into a T is an error wrapping ErrMeasure, never a record skipped: the
// group scenario's shard terms and the clock scenario's passes are read
// from these records, and one dropped unseen would hide a holder or a
// pass from the figures.
func logRecords[T any](path, msg string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMeasure, err)
	}
	defer f.Close()
	quoted, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMeasure, err)
	}
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		var head struct {
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal(line, &head); err != nil || head.Msg != msg {
			if err != nil && bytes.Contains(line, quoted) {
				return nil, fmt.Errorf("%w: %s line %d names %s but is not a JSON record: %w", ErrMeasure, path, n, quoted, err)
			}
			continue
		}
		var rec T
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: a %s record that does not decode: %w", ErrMeasure, path, n, quoted, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMeasure, path, err)
	}
	return out, nil
}
