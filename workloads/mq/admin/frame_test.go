package admin

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// fastjson's integer map keys are read; numbers and colons inside strings
// are left as they are.
func TestDecodeIntegerKeys(t *testing.T) {
	var v struct {
		Table map[string]struct {
			Addrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
	}
	body := []byte(`{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"10.0.0.2:10911"}}}}`)
	require.NoError(t, decode(body, &v))
	require.Equal(t, map[string]string{"0": "127.0.0.1:10911", "1": "10.0.0.2:10911"}, v.Table["broker-a"].Addrs)
}

// A frame written is the frame read: length, JSON mark, header, body.
func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	h := header{Code: 17, Language: "GO", Opaque: 9, Flag: 1, ExtFields: map[string]string{"topic": "t"}}
	require.NoError(t, writeFrame(&buf, h, []byte("body")))
	got, body, err := readFrame(&buf)
	require.NoError(t, err)
	require.Equal(t, h, got)
	require.Equal(t, []byte("body"), body)

	bad := []byte{0, 0, 0, 8, 1, 0, 0, 2, '{', '}', 0, 0}
	_, _, err = readFrame(bytes.NewReader(bad))
	require.ErrorContains(t, err, "not JSON")
	huge := []byte{0x7f, 0, 0, 0, 0, 0, 0, 2}
	_, _, err = readFrame(bytes.NewReader(huge))
	require.ErrorContains(t, err, "bad frame")
}
