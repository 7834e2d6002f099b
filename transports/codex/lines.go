package codex

import (
	"bufio"
	"errors"
	"io"
)

// lineReader reads newline-terminated lines of at most max bytes. A longer
// line is read through without being kept and reported with its length,
// so one huge line costs no memory and never stops the stream.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline, or (nil, n, nil) for a
// dropped line of n bytes, or the read error (io.EOF at the end; a last
// line without a newline comes first). The slice is valid until the next
// call.
func (lr *lineReader) next() (line []byte, over int, err error) {
	lr.buf = lr.buf[:0]
	n := 0
	for {
		chunk, err := lr.r.ReadSlice('\n')
		n += len(chunk)
		if n <= lr.max+1 {
			lr.buf = append(lr.buf, chunk...)
		}
		switch {
		case err == nil:
			if n-1 > lr.max {
				return nil, n - 1, nil
			}
			return lr.buf[:len(lr.buf)-1], 0, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && n > 0:
			if n > lr.max {
				return nil, n, nil
			}
			return lr.buf, 0, nil
		default:
			return nil, 0, err
		}
	}
}
