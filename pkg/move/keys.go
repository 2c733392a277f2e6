package move

import "encoding/base64"

// maxKey is the longest key memcached takes on a command line (its
// KEY_MAX_LENGTH), as sent: memcached 1.6.18 bounds a base64 key before it
// decodes it.
const maxKey = 250

// wireKey is key as a meta command carries it: its word, and the flags to
// add after the command's other words. A key the text protocol takes as it
// is goes as it is; any other, whatever bytes a client stored it with (the
// binary protocol takes any), goes in base64 with the b flag, so that it
// never reads as more than one word of a command line. A key of more than
// 186 bytes that needs base64 cannot be sent at all (speakable).
func wireKey(key string) (word, flags string) {
	if plainKey(key) {
		return key, ""
	}
	return base64.StdEncoding.EncodeToString([]byte(key)), " b"
}

// plainKey tells whether key can go on a command line as it is: at most
// maxKey bytes, none a space or a control byte.
func plainKey(key string) bool {
	if key == "" || len(key) > maxKey {
		return false
	}
	for i := range len(key) {
		if key[i] <= ' ' || key[i] == 0x7f {
			return false
		}
	}
	return true
}

// speakable tells whether memcached takes key on a command line, as
// wireKey writes it.
func speakable(key string) bool {
	return plainKey(key) || base64.StdEncoding.EncodedLen(len(key)) <= maxKey
}
