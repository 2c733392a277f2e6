package autoscale

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// FetchTimeout bounds a reading of one pod's Signals: a count of the
// working set walks every item of its memcached.
const FetchTimeout = 30 * time.Second

// Fetch reads the Signals the pod at ip serves on SignalsPort, with its
// working set over seconds (none when 0).
func Fetch(ctx context.Context, hc *http.Client, ip string, seconds int64) (Signals, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(ip, strconv.Itoa(int(SignalsPort))), Path: SignalsPath}
	if seconds > 0 {
		u.RawQuery = url.Values{WorkingSetParam: {strconv.FormatInt(seconds, 10)}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Signals{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Signals{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Signals{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Signals{}, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var s Signals
	if err := json.Unmarshal(body, &s); err != nil {
		return Signals{}, fmt.Errorf("the signals: %w", err)
	}
	return s, nil
}
