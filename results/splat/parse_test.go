package splat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"
)

func TestParseReader(t *testing.T) {
	log := goldenLog(t, "null_deref_panic.log")
	var got []string
	err := ParseReader(context.Background(), iotest.OneByteReader(bytes.NewReader(log)), func(r Report) error {
		got = append(got, r.Title)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"BUG: unable to handle kernel NULL pointer dereference in fuse_uring_commit_fetch", "kernel panic: Fatal exception"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("titles %q, want %q", got, want)
	}
}

func TestParseReaderErrors(t *testing.T) {
	log := goldenLog(t, "hung_task.log")
	errStop := errors.New("stop")
	errRead := errors.New("disk on fire")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		r    io.Reader
		f    func(Report) error
		want error
	}{
		{"callback error", context.Background(), bytes.NewReader(log), func(Report) error { return errStop }, errStop},
		{"read error", context.Background(), io.MultiReader(bytes.NewReader(log), iotest.ErrReader(errRead)),
			func(Report) error { return nil }, errRead},
		{"canceled", canceled, bytes.NewReader(log), func(Report) error { return nil }, context.Canceled},
	} {
		calls := 0
		err := ParseReader(tc.ctx, tc.r, func(r Report) error { calls++; return tc.f(r) })
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == errStop && calls != 1 {
			t.Errorf("%s: callback called %d times after its error", tc.name, calls)
		}
	}
}
