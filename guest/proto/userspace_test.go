package proto

import (
	"reflect"
	"testing"
)

func TestUserspaceParamRoundTrip(t *testing.T) {
	for _, u := range []UserspaceStep{
		{Serial: "klab-userspace", FSType: "ext4", Root: "/klab/userspace", Writable: []string{"/tmp", "/var/tmp", "/run"}},
		{Serial: "s", FSType: "ext4", Root: "/r"},
	} {
		v, err := u.Param()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseUserspaceParam(v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, u) {
			t.Errorf("%q: got %+v, want %+v", v, *got, u)
		}
	}
	for _, u := range []UserspaceStep{
		{Serial: "a:b", FSType: "ext4", Root: "/r"},
		{Serial: "s", FSType: "ext4", Root: "/r", Writable: []string{"/a,b"}},
		{Serial: "s", FSType: "", Root: "/r"},
		{Serial: "s", FSType: "ext4", Root: "/r s"},
	} {
		if v, err := u.Param(); err == nil {
			t.Errorf("%+v: encoded as %q, want an error", u, v)
		}
	}
	for _, v := range []string{"", "a:b", "a::c", "a:b:c:d:e"} {
		if _, err := ParseUserspaceParam(v); err == nil {
			t.Errorf("%q: parsed, want an error", v)
		}
	}
}
