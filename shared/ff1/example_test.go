package ff1_test

import (
	"fmt"

	"github.com/edgelink/edgelink/shared/ff1"
)

func ExampleCodes() {
	// A real key is 32 random bytes from the operator's secret store.
	key := []byte("example key, never use it: 32 B!")
	codes, err := ff1.NewCodes(key, "go.acme.com")
	if err != nil {
		fmt.Println(err)
		return
	}
	for id := uint64(1); id <= 3; id++ {
		code, _ := codes.Encode(id)
		back, ok := codes.Decode(code[:])
		fmt.Println(id, string(code[:]), back, ok)
	}
	fmt.Println(codes)
	// Output:
	// 1 DaaIBG 1 true
	// 2 hIHmHt 2 true
	// 3 i50HWV 3 true
	// ff1.Codes{domain: "go.acme.com"}
}
