package fielderr_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/fielderr"
)

func TestFieldErrors(t *testing.T) {
	e := fielderr.New("source.dims[1]", "unknown mesh axis %q", "q")
	assert.Equal(t, `source.dims[1]: unknown mesh axis "q"`, e.Error())
	assert.Equal(t, "a literal message", fielderr.New("", "a literal message").Message, "no args: the format is the message")

	wrapped := fmt.Errorf("planning: %w", fielderr.Errors{e, fielderr.New("target", "bad")})
	es, ok := fielderr.As(wrapped)
	require.True(t, ok)
	assert.Len(t, es, 2)
	one, ok := fielderr.As(fmt.Errorf("x: %w", e))
	require.True(t, ok)
	assert.Equal(t, fielderr.Errors{e}, one)
	_, ok = fielderr.As(fmt.Errorf("plain"))
	assert.False(t, ok)
	assert.NoError(t, fielderr.Errors(nil).Err())
}

func TestUnknownJSONField(t *testing.T) {
	var v struct {
		Mesh string `json:"mesh"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(`{"mesh": "x=2", "meshh": 1}`)))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	name, ok := fielderr.UnknownJSONField(err)
	require.True(t, ok, "encoding/json's message for unknown fields still reads the same: %v", err)
	assert.Equal(t, "meshh", name)
	_, ok = fielderr.UnknownJSONField(json.Unmarshal([]byte(`{`), &v))
	assert.False(t, ok)
	_, ok = fielderr.UnknownJSONField(nil)
	assert.False(t, ok)
}
