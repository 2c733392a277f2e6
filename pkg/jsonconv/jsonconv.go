// Package jsonconv converts between types that share a JSON form: an apply
// configuration and the API object it configures, or an API value and its
// apply configuration.
package jsonconv

import (
	"encoding/json"
	"fmt"
)

// Convert decodes into the JSON encoding of from.
func Convert(from, into any) error {
	raw, err := json.Marshal(from)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", from, err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("decoding %T into %T: %w", from, into, err)
	}
	return nil
}
