// Package pagecursor is the opaque cursor of authd's list endpoints (admin
// API and CLI): the key of the last row of a page, tagged with the list it
// belongs to, so a cursor is refused by any other list and anything a
// caller forged or mangled is refused before it reaches a query.
package pagecursor

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// version is the cursor format; a cursor of another version is refused.
const version = 2

// sumLen is the length of the checksum that ends a cursor: not a secret
// (a caller may list anyway), it tells a mangled or truncated cursor from
// one this package wrote.
const sumLen = 4

func sum(b []byte) []byte { s := sha256.Sum256(b); return s[:sumLen] }

// MaxKey bounds a cursor's key in bytes (usernames, client ids and session
// ids are far shorter).
const MaxKey = 512

// Encode returns the cursor of the page after key in the list named list
// ("clients", "users", "sessions:<subject>", …).
func Encode(list, key string) string {
	b := make([]byte, 0, 2+len(list)+len(key))
	b = append(b, version, byte(len(list)))
	b = append(b, list...)
	b = append(b, key...)
	b = append(b, sum(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode reverses Encode for list: "" is the first page (key ""). ok is
// false for anything Encode did not return for this list: bad base64, a
// wrong checksum, another version or list, an empty key, a key that is not valid UTF-8, holds a NUL
// or is longer than MaxKey.
func Decode(list, cursor string) (key string, ok bool) {
	if cursor == "" {
		return "", true
	}
	if len(cursor) > base64.RawURLEncoding.EncodedLen(2+255+MaxKey+sumLen) {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	if err != nil || len(b) < 2+sumLen || b[0] != version {
		return "", false
	}
	b, check := b[:len(b)-sumLen], b[len(b)-sumLen:]
	if !bytes.Equal(sum(b), check) {
		return "", false
	}
	n := int(b[1])
	if len(b) < 2+n || string(b[2:2+n]) != list {
		return "", false
	}
	key = string(b[2+n:])
	if key == "" || len(key) > MaxKey || !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return "", false
	}
	return key, true
}
