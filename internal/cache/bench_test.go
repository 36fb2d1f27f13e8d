package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardplan/shardplan/internal/cache"
)

// benchValue is a plan-sized response (4 KiB).
var benchValue = bytes.Repeat([]byte("x"), 4<<10)

func BenchmarkLRU(b *testing.B) {
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = cache.DefaultPrefix + "v1:" + cache.PlanID(fmt.Appendf(nil, "%d", i))
	}
	b.Run("Get", func(b *testing.B) {
		l := cache.NewLRU(0)
		for _, k := range keys {
			_ = l.Set(ctx, k, benchValue, time.Hour)
		}
		if _, ok, _ := l.Get(ctx, keys[0]); !ok {
			b.Fatal("warm key missing")
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_, _, _ = l.Get(ctx, keys[i%len(keys)])
			i++
		}
	})
	b.Run("Set", func(b *testing.B) {
		l := cache.NewLRU(1 << 20) // 1 MiB: about 250 values, so Set also evicts
		b.ReportAllocs()
		b.SetBytes(int64(len(benchValue)))
		i := 0
		for b.Loop() {
			_ = l.Set(ctx, keys[i%len(keys)], benchValue, time.Hour)
			i++
		}
	})
	b.Run("GetParallel", func(b *testing.B) {
		l := cache.NewLRU(0)
		for _, k := range keys {
			_ = l.Set(ctx, k, benchValue, time.Hour)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				_, _, _ = l.Get(ctx, keys[i%len(keys)])
				i++
			}
		})
	})
}

func BenchmarkRedisGetHit(b *testing.B) {
	cfg := cache.SharedRedis(b)
	cfg.TTL = time.Minute
	r, err := cache.NewRedis(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	ctx := context.Background()
	key := cfg.Prefix + "bench"
	if err := r.Set(ctx, key, benchValue, time.Minute); err != nil {
		b.Fatal(err)
	}
	if v, ok, err := r.Get(ctx, key); err != nil || !ok || !bytes.Equal(v, benchValue) {
		b.Fatalf("warm get: ok=%v err=%v", ok, err)
	}
	b.Run("Store", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := r.Get(ctx, key); err != nil || !ok {
				b.Fatalf("ok=%v err=%v", ok, err)
			}
		}
	})
	b.Run("GetOrCompute", func(b *testing.B) {
		c, err := cache.New(r, cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		compute := func(context.Context) ([]byte, error) { return nil, errors.New("computed on a hit") }
		b.ReportAllocs()
		for b.Loop() {
			if _, hit, err := c.GetOrCompute(ctx, key, compute); err != nil || !hit {
				b.Fatalf("hit=%v err=%v", hit, err)
			}
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok, err := r.Get(ctx, key); err != nil || !ok {
					b.Errorf("ok=%v err=%v", ok, err)
					return
				}
			}
		})
	})
}

// deepCompute descends n frames of about 600 bytes each, as planning a reshard descends
// its search, and returns the depth reached.
//
//go:noinline
func deepCompute(n int, pad [64]int64) int64 {
	if n == 0 {
		return 0
	}
	pad[n%64]++
	return deepCompute(n-1, pad) + 1
}

// BenchmarkGetOrComputeMiss times a miss whose compute descends about 60 KiB of stack
// and returns a plan-sized value: the goroutine it runs on, its stack, the write.
func BenchmarkGetOrComputeMiss(b *testing.B) {
	c, err := cache.Open(cache.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	compute := func(context.Context) ([]byte, error) {
		if deepCompute(100, [64]int64{}) != 100 {
			return nil, errors.New("lost a frame")
		}
		return benchValue, nil
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, hit, err := c.GetOrCompute(ctx, c.Key(cache.PlanID(fmt.Appendf(nil, "%d", i))), compute); err != nil || hit {
			b.Fatalf("hit=%v err=%v", hit, err)
		}
	}
}
