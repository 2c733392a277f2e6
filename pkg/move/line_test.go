package move

import (
	"bufio"
	"strings"
	"testing"
)

// A line of exactly maxLine bytes, its end included, is read; one byte
// more is refused, also when it arrives in one piece.
func TestALineIsReadUpToItsBound(t *testing.T) {
	for _, c := range []struct {
		size int
		ok   bool
	}{{maxLine, true}, {maxLine + 1, false}, {maxLine + 100, false}} {
		line := strings.Repeat("a", c.size-2) + "\r\n"
		got, err := readLine(bufio.NewReaderSize(strings.NewReader(line), 64<<10))
		if c.ok && (err != nil || got != line[:c.size-2]) {
			t.Errorf("a line of %d bytes: %v", c.size, err)
		}
		if !c.ok && err == nil {
			t.Errorf("a line of %d bytes was read, over the bound of %d", c.size, maxLine)
		}
	}
}
