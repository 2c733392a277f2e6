package main

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// countingCore counts the Withs that reach the core, the ones that encode.
type countingCore struct {
	zapcore.Core
	withs *int
}

func (c countingCore) With(fields []zapcore.Field) zapcore.Core {
	*c.withs++
	return countingCore{c.Core.With(fields), c.withs}
}

func TestLazyFieldsEncodeOnlyForWrittenEntries(t *testing.T) {
	obs, logs := observer.New(zapcore.ErrorLevel)
	var withs int
	log := zap.New(lazyFields{countingCore{obs, &withs}})

	quiet := log.With(zap.String("controller", "memcached")).With(zap.String("reconcileID", "1"))
	quiet.Info("below the level")
	if withs != 0 {
		t.Fatalf("fields encoded for a logger that wrote nothing: %d Withs reached the core", withs)
	}

	quiet.With(zap.Int64("generation", 3)).Error("written")
	if withs != 3 {
		t.Errorf("%d Withs reached the core for an entry with three of them, want 3", withs)
	}
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("got %d entries, want 1", len(entries))
	}
	got := entries[0].ContextMap()
	for k, v := range map[string]any{"controller": "memcached", "reconcileID": "1", "generation": int64(3)} {
		if got[k] != v {
			t.Errorf("field %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
