package vm

import (
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
)

// TestByteBudget: held bytes never pass the budget (but one message always
// fits), a release lets a waiting reader on, and close fails waiters.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	if !b.acquire(60) || !b.acquire(40) {
		t.Fatal("acquire within the budget failed")
	}
	got := make(chan bool, 1)
	go func() { got <- b.acquire(10) }()
	select {
	case <-got:
		t.Fatal("acquire past the budget did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(60)
	if ok := <-got; !ok || b.used != 50 {
		t.Fatalf("after a release: %v, used %d", ok, b.used)
	}
	b.release(50)
	// A message larger than the whole budget still passes alone.
	if !b.acquire(1000) {
		t.Fatal("one large message did not fit an empty budget")
	}
	go func() { got <- b.acquire(1) }()
	time.Sleep(20 * time.Millisecond)
	b.close()
	if <-got || b.acquire(1) {
		t.Error("acquire after close succeeded")
	}
}

func TestDecoderSize(t *testing.T) {
	line := `{"v":1,"kind":"log","log":{"msg":"` + strings.Repeat("x", 1000) + `"}}`
	d := proto.NewDecoder(strings.NewReader("noise\n" + line + "\n"))
	if _, err := d.Decode(); err != nil {
		t.Fatal(err)
	}
	if d.Size() != len(line) {
		t.Errorf("Size() = %d, want %d", d.Size(), len(line))
	}
}
