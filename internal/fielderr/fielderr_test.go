package fielderr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFieldErrors(t *testing.T) {
	e := New(Index(Join("source", "dims"), 1), "unknown mesh axis %q", "q")
	assert.Equal(t, `source.dims[1]: unknown mesh axis "q"`, e.Error())
	assert.Equal(t, "a literal message", New("", "a literal message").Message, "no args: the format is the message")
	assert.Equal(t, "dims", Join("", "dims"))

	wrapped := fmt.Errorf("planning: %w", Errors{e, New("target", "bad")})
	es, ok := As(wrapped)
	require.True(t, ok)
	assert.Len(t, es, 2)
	one, ok := As(fmt.Errorf("x: %w", e))
	require.True(t, ok)
	assert.Equal(t, Errors{e}, one)
	_, ok = As(fmt.Errorf("plain"))
	assert.False(t, ok)
	assert.NoError(t, Errors(nil).Err())
}

func TestUnknownJSONField(t *testing.T) {
	var v struct {
		Mesh string `json:"mesh"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(`{"mesh": "x=2", "meshh": 1}`)))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	name, ok := UnknownJSONField(err)
	require.True(t, ok, "encoding/json's message for unknown fields still reads the same: %v", err)
	assert.Equal(t, "meshh", name)
	_, ok = UnknownJSONField(json.Unmarshal([]byte(`{`), &v))
	assert.False(t, ok)
	_, ok = UnknownJSONField(nil)
	assert.False(t, ok)
}
