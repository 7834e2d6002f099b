package transports

import (
	"bufio"
	"errors"
	"io"
)

// LineReader reads newline-terminated lines, each at most max bytes, from a
// backend's stdout. A longer line is dropped (read through to its end
// without being kept) and reported with its length, so one huge line costs
// no memory and never stops the stream. It is not safe for concurrent use:
// one reader goroutine owns it.
type LineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewLineReader reads r with a cap of max bytes a line.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next line without its newline, or (head, n, nil) for a
// dropped line of n bytes (n > max) whose first HeadBytes at most are head,
// kept so a report can say what the line was, or io.EOF at the end of the
// stream (a last line without a newline is returned before it). The
// returned slice is valid until the next call.
func (lr *LineReader) Next() (line []byte, over int, err error) {
	lr.buf = lr.buf[:0]
	n := 0
	for {
		chunk, err := lr.r.ReadSlice('\n')
		n += len(chunk)
		if n <= lr.max+1 { // +1: the newline does not count
			lr.buf = append(lr.buf, chunk...)
		} else {
			if len(lr.buf) < HeadBytes {
				lr.buf = append(lr.buf, chunk[:min(len(chunk), HeadBytes-len(lr.buf))]...)
			}
			lr.buf = lr.buf[:min(len(lr.buf), HeadBytes)]
		}
		switch {
		case err == nil:
			if n-1 > lr.max {
				return lr.head(), n - 1, nil
			}
			return lr.buf[:len(lr.buf)-1], 0, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && n > 0:
			if n > lr.max {
				return lr.head(), n, nil
			}
			return lr.buf, 0, nil
		default:
			return nil, 0, err
		}
	}
}

// HeadBytes is how much of a dropped line Next keeps.
const HeadBytes = 80

func (lr *LineReader) head() []byte {
	h := lr.buf[:min(len(lr.buf), HeadBytes)]
	for len(h) > 0 && (h[len(h)-1] == '\n' || h[len(h)-1] == '\r') {
		h = h[:len(h)-1]
	}
	return h
}
