package podlog

import (
	"fmt"
	"slices"
)

// Messages of the warm runner's Start reports.
const (
	// RestoredMessage: memcached restored its cache from the memory
	// file, and holds Items items (or ItemsError says why they could not
	// be counted). The operator reads it to confirm a restart in place.
	RestoredMessage = "memcached restored its cache from the memory file"
	// EmptyMessage: memcached started with an empty cache, and Memcached
	// is what it said.
	EmptyMessage = "memcached started with an empty cache"
)

// Start is the warm runner's report of a memcached start. Settings are
// the flags it added to memcached's command line (package settings), set
// when the runner takes settings from the pod at all: the operator
// confirms a restart for new settings by them.
type Start struct {
	Msg        string    `json:"msg"`
	Items      *int      `json:"items,omitempty"`
	ItemsError string    `json:"itemsError,omitempty"`
	Memcached  string    `json:"memcached,omitempty"`
	Settings   *[]string `json:"settings,omitempty"`
}

// Restored is the report of a restore of n items (err: why they could not
// be counted) with settings (nil: the runner takes none).
func Restored(n int, err error, settings []string) Start {
	s := Start{Msg: RestoredMessage, Settings: settingsOf(settings)}
	if err != nil {
		s.ItemsError = err.Error()
	} else {
		s.Items = &n
	}
	return s
}

// Empty is the report of an empty start, memcached having said said.
func Empty(said string, settings []string) Start {
	return Start{Msg: EmptyMessage, Memcached: said, Settings: settingsOf(settings)}
}

func settingsOf(flags []string) *[]string {
	if flags == nil {
		return nil
	}
	return &flags
}

// IsRestore tells whether s reports a restore.
func (s Start) IsRestore() bool { return s.Msg == RestoredMessage }

// String says what s reports, for the operator's events.
func (s Start) String() string {
	switch {
	case s.IsRestore() && s.Items != nil:
		return fmt.Sprintf("memcached restored %d items from its memory file", *s.Items)
	case s.IsRestore():
		return "memcached restored its cache from its memory file; counting its items failed: " + s.ItemsError
	case s.Msg == EmptyMessage:
		return "memcached started with an empty cache: " + s.Memcached
	}
	return "the warm runner said nothing of a restore at the start of memcached's log"
}

// FirstStart is the first Start report in log, a memcached container's:
// of a start on settings when settings is not nil. ok is false when the
// runner has not reported it (yet).
func FirstStart(log []byte, settings []string) (s Start, ok bool) {
	for s := range Lines[Start](log) {
		if settings != nil && (s.Settings == nil || !slices.Equal(*s.Settings, settings)) {
			continue
		}
		if s.Msg == RestoredMessage || s.Msg == EmptyMessage {
			return s, true
		}
	}
	return Start{}, false
}
