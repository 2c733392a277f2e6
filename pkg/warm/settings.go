package warm

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/example/memcached-operator/pkg/settings"
)

// watchSettings reads c.SettingsFile every c.SettingsPoll once serving is
// closed, until done is, and sends on changed, once, what it holds when
// that is no longer running.
func watchSettings(c Config, running []string, serving, done <-chan struct{}, changed chan<- []string) {
	select {
	case <-serving:
	case <-done:
		return
	}
	t := time.NewTicker(c.SettingsPoll)
	defer t.Stop()
	failing := false
	told := ""
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		now, refused, err := readSettings(c.SettingsFile)
		if refused != nil && refused.Error() != told {
			c.Log.Error(RefusedSettingsMessage, "error", refused.Error())
			told = refused.Error()
		}
		if err != nil {
			if !failing {
				c.Log.Error("Cannot read memcached's settings", "error", err.Error())
			}
			failing = true
			continue
		}
		failing = false
		if !slices.Equal(now, running) {
			changed <- now
			return
		}
	}
}

// readSettings reads memcached's flags from file, one per line: none
// when file is "" (no settings file). Only the flags the operator writes
// are taken (package settings); refused names the others, left out.
func readSettings(file string) (flags []string, refused, err error) {
	if file == "" {
		return nil, nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("reading memcached's settings: %w", err)
	}
	flags, refused = settings.Parse(string(b))
	return flags, refused, nil
}
