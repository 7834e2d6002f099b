package filestore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// indexEvery is the stride of a log's seq -> offset index: ReadEvents
// starts at most this many lines before the first event it returns.
const indexEvery = 64

// scan is what reading a log from its first line found.
type scan struct {
	size    int64   // end of the last good line
	lastSeq uint64  // seq of the last good line (line k holds seq k)
	index   []int64 // index[i]: offset of the line holding seq i*indexEvery+1
	// badLine is the first line that is not good (0: none); badOK tells
	// whether an intact line follows it (then the log is corrupt, not torn).
	badLine   int
	badReason error
	intactAft bool
	end       int64 // the file's size
}

// lineSeqOf reports the seq of a terminated line, ok false when it does not
// decode as an event with a seq.
func lineSeqOf(line []byte) (uint64, bool) {
	if len(line) == 0 || len(line) > store.MaxEventBytes || line[0] != '{' {
		return 0, false
	}
	var ev messages.PersistedEvent
	if json.Unmarshal(line, &ev) != nil || ev.Seq == 0 {
		return 0, false
	}
	return ev.Seq, true
}

// scanLog reads a log from the start. A line is good when it is terminated,
// decodes and holds seq k on line k. After the first line that is not, the
// rest is searched for an intact line (terminated, decoding, holding the seq
// of its line number): one means a corrupt middle, none a torn tail. stopAt
// > 0 ends the scan after the line holding that seq (the rest is about to be
// rewritten from the WAL).
func scanLog(r io.Reader, end int64, stopAt uint64) (scan, error) {
	sc := scan{end: end}
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	var off int64
	lineNo := 0
	for {
		if stopAt > 0 && sc.lastSeq >= stopAt {
			return sc, nil
		}
		var err error
		line, err = readLine(br, line[:0])
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errLineTooLong) {
			return sc, err
		}
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return sc, nil
		}
		lineNo++
		terminated := err == nil
		if sc.badLine == 0 {
			seq, ok := lineSeqOf(line)
			switch {
			case !terminated && errors.Is(err, errLineTooLong):
				sc.badLine, sc.badReason = lineNo, errLineTooLong
			case !terminated:
				sc.badLine, sc.badReason = lineNo, io.ErrUnexpectedEOF
			case !ok:
				sc.badLine, sc.badReason = lineNo, errors.New("does not decode as an event")
			case seq != uint64(lineNo):
				sc.badLine, sc.badReason = lineNo, fmt.Errorf("holds seq %d, want %d", seq, lineNo)
			default:
				if (seq-1)%indexEvery == 0 {
					sc.index = append(sc.index, off)
				}
				off += int64(len(line)) + 1
				sc.size, sc.lastSeq = off, seq
				continue
			}
		} else if terminated {
			if seq, ok := lineSeqOf(line); ok && seq == uint64(lineNo) {
				sc.intactAft = true
				return sc, nil
			}
		}
		if !terminated {
			if errors.Is(err, errLineTooLong) {
				// skip the rest of the overlong line
				if _, derr := br.ReadBytes('\n'); derr != nil {
					return sc, nil
				}
				continue
			}
			return sc, nil
		}
	}
}

var errLineTooLong = fmt.Errorf("line longer than %d bytes", store.MaxEventBytes)

// readLine appends the next line, without its newline, to buf. A final line
// without a newline is returned with io.EOF.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > store.MaxEventBytes+1 {
			return buf[:0], errLineTooLong
		}
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, err
		}
	}
}

// indexLines extends a session's index with the lines of buf, which start at
// offset off and hold seqs first, first+1, ...
func indexLines(index []int64, buf []byte, off int64, first uint64) []int64 {
	seq := first
	for len(buf) > 0 {
		if (seq-1)%indexEvery == 0 {
			index = append(index, off)
		}
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		off += int64(i) + 1
		buf = buf[i+1:]
		seq++
	}
	return index
}
