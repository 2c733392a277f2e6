package golimit

import "testing"

func TestOfLeavesRoomForTheBinary(t *testing.T) {
	const mib = 1 << 20
	if got, want := Of(256*mib), int64(192*mib); got != want {
		t.Errorf("Of(256Mi) = %d MiB, want %d MiB", got/mib, want/mib)
	}
	// 45 MiB of resident binary pages must fit beside the Go runtime in
	// the manager's 256Mi.
	if room := 256*mib - Of(256*mib); room < 45*mib {
		t.Errorf("room beside the Go runtime = %d MiB, want at least 45 MiB", room/mib)
	}
}
