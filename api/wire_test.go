package api

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

// randomOf fills a value of type t at random, each field, element and entry left at
// its zero value (nil, 0, "", false) one time in four, so that omitempty members, null
// lists and empty maps all occur.
func randomOf(rng *rand.Rand, t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	if rng.IntN(4) == 0 {
		return v
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			v.Field(i).Set(randomOf(rng, t.Field(i).Type))
		}
	case reflect.Slice:
		n := rng.IntN(4)
		v.Set(reflect.MakeSlice(t, n, n))
		for i := range n {
			v.Index(i).Set(randomOf(rng, t.Elem()))
		}
	case reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		v.Elem().Set(randomOf(rng, t.Elem()))
	case reflect.Array:
		for i := range t.Len() {
			v.Index(i).Set(randomOf(rng, t.Elem()))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		for range rng.IntN(3) {
			v.SetMapIndex(randomOf(rng, t.Key()), randomOf(rng, t.Elem()))
		}
	case reflect.Float64:
		// Numbers as the cost model and the planner give them: whole, fractional, tiny.
		v.SetFloat([]float64{1, 0.6, 24.3, 1e-7, 1e21, rng.Float64() * 1000}[rng.IntN(6)])
	case reflect.Int, reflect.Int64:
		v.SetInt(rng.Int64N(1<<40) - 1<<20)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString([]string{"x", "ici", "<&>", "µs \"q\"", "\u2028", "a\x00b"}[rng.IntN(6)])
	default:
		panic("no random value of " + t.String())
	}
	return v
}

// TestWireTypesEncodeAsDomain: each wire type's converter gives, for random domain
// values, exactly the bytes encoding/json writes for the domain value itself (same
// member names, order, omitempty rules and number forms), so answers did not change
// when they stopped naming domain types.
func TestWireTypesEncodeAsDomain(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 40))
	for _, tc := range []struct {
		domain any
		wire   func(v reflect.Value) any
	}{
		{planner.Transfer{}, func(v reflect.Value) any { return transferOf(v.Interface().(planner.Transfer)) }},
		{planner.TransferRun{}, func(v reflect.Value) any { return transferRunOf(v.Interface().(planner.TransferRun)) }},
		{[]planner.Transfer{}, func(v reflect.Value) any { return transfersOf(v.Interface().([]planner.Transfer)) }},
		{[]planner.TransferRun{}, func(v reflect.Value) any { return transferRunsOf(v.Interface().([]planner.TransferRun)) }},
		{[]planner.PairRun{}, func(v reflect.Value) any { return pairRunsOf(v.Interface().([]planner.PairRun)) }},
		{[]planner.Candidate{}, func(v reflect.Value) any { return candidatesOf(v.Interface().([]planner.Candidate)) }},
		{[]sharding.DeviceTile{}, func(v reflect.Value) any { return deviceTilesOf(v.Interface().([]sharding.DeviceTile)) }},
		{[]sharding.Owner{}, func(v reflect.Value) any { return ownersOf(v.Interface().([]sharding.Owner)) }},
		{propagation.Stats{}, func(v reflect.Value) any { return graphStatsOf(v.Interface().(propagation.Stats)) }},
		{sharding.FieldError{}, func(v reflect.Value) any {
			fe := v.Interface().(sharding.FieldError)
			return fieldErrorOf(&fe)
		}},
		{cost.ProfileInfo{}, func(v reflect.Value) any { return costModelOf(v.Interface().(cost.ProfileInfo)) }},
	} {
		typ := reflect.TypeOf(tc.domain)
		t.Run(typ.String(), func(t *testing.T) {
			for range 300 {
				v := randomOf(rng, typ)
				want, err := encodeJSON(v.Interface())
				require.NoError(t, err)
				got, err := encodeJSON(tc.wire(v))
				require.NoError(t, err)
				require.Equal(t, string(want), string(got))
			}
		})
	}
}

// TestWireTypesBackToDomain: the wire forms read back into the domain (a drawing's runs,
// a nested problem's field errors) are the values they came from.
func TestWireTypesBackToDomain(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 41))
	for range 300 {
		tr := randomOf(rng, reflect.TypeFor[planner.Transfer]()).Interface().(planner.Transfer)
		assert.Equal(t, tr, transferOf(tr).domain())

		rank := rng.IntN(4)
		run := planner.TransferRun{First: rankedTransfer(rng, rank), Step: rankedTransfer(rng, rank), Count: rng.IntN(5)}
		assert.Equal(t, transfersOf(run.Expand()), transferRunOf(run).Expand())

		pr := randomOf(rng, reflect.TypeFor[planner.PairRun]()).Interface().(planner.PairRun)
		pr.Count = rng.IntN(5)
		assert.Equal(t, pr.Expand(), pairRunsOf([]planner.PairRun{pr})[0].Expand())

		fes := randomOf(rng, reflect.TypeFor[[]sharding.FieldError]()).Interface().([]sharding.FieldError)
		wire := make([]FieldError, len(fes))
		for i := range fes {
			wire[i] = fieldErrorOf(&fes[i])
		}
		back := domainFieldErrors(wire)
		require.Len(t, back, len(fes))
		for i := range fes {
			assert.Equal(t, fes[i], *back[i])
		}
	}
}

// rankedTransfer is a random transfer whose three range lists have rank entries, as
// the planner's have.
func rankedTransfer(rng *rand.Rand, rank int) planner.Transfer {
	ranges := func() planner.Range {
		r := make(planner.Range, rank)
		for d := range r {
			r[d] = [2]int64{rng.Int64N(100), rng.Int64N(100)}
		}
		return r
	}
	return planner.Transfer{From: rng.IntN(64), To: rng.IntN(64), Ranges: ranges(), SourceLocal: ranges(), TargetLocal: ranges(), Bytes: rng.Int64N(1 << 20)}
}

// TestWireNamesNoDomainType walks every type the OpenAPI document describes (each
// route's request and answer, the problem, the probes) through the members that reach
// the wire, and fails on a type of another package: swag would publish it under that
// package's name (planner.Transfer, sharding.DeviceTile), and a change of the domain
// type would change the wire silently. Members typed by hand for swag (swaggertype) or
// hidden from it (swaggerignore, json "-") are not walked.
func TestWireNamesNoDomainType(t *testing.T) {
	apiPkg := reflect.TypeFor[Problem]().PkgPath()
	seen := map[reflect.Type]string{}
	var walk func(t reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		if _, ok := seen[typ]; ok {
			return
		}
		seen[typ] = path
		if typ.Name() != "" && typ.PkgPath() != "" && typ.PkgPath() != apiPkg {
			t.Errorf("%s is %s, a type of %s: give it an api wire type", path, typ, typ.PkgPath())
			return
		}
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(typ.Elem(), path+"[]")
		case reflect.Map:
			walk(typ.Key(), path+"{key}")
			walk(typ.Elem(), path+"{}")
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if !f.IsExported() || name == "-" || f.Tag.Get("swaggertype") != "" || f.Tag.Get("swaggerignore") == "true" {
					continue
				}
				if f.Anonymous && name == "" {
					walk(f.Type, path)
					continue
				}
				walk(f.Type, path+"."+f.Name)
			}
		}
	}
	for _, root := range []any{
		ReshardRequest{}, ReshardResponse{}, TilesRequest{}, TilesResponse{}, GraphRequest{}, GraphResponse{},
		AuditRequest{}, AuditResponse{}, TransferRequest{}, TransferResponse{}, CostModelList{}, CostModel{},
		Problem{}, Health{}, Readiness{},
	} {
		walk(reflect.TypeOf(root), reflect.TypeOf(root).Name())
	}
	assert.Contains(t, seen, reflect.TypeFor[Transfer](), "the walk reaches the steps' transfers")
}
