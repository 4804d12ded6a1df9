package balancer_test

import (
	"fmt"

	"github.com/helios-lb/helios/internal/balancer"
	"github.com/helios-lb/helios/internal/upstream"
)

// ExampleNew builds a weighted round robin over three backends and shows
// the smooth interleaving, then how a retry excludes the backend it tried.
func ExampleNew() {
	var backends []*upstream.Backend
	for i, w := range []int{5, 1, 1} {
		backends = append(backends, &upstream.Backend{
			State:  upstream.NewState(nil),
			Addr:   fmt.Sprintf("10.0.0.%d:80", i+1),
			Weight: w,
			Index:  i,
		})
	}
	p, err := balancer.New(balancer.WeightedRoundRobin, backends, balancer.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 7 {
		if i > 0 {
			fmt.Print(" ")
		}
		fmt.Print(p.Pick(upstream.Key{}).Addr)
	}
	fmt.Println()

	var k upstream.Key
	k.Exclude.Add(0) // the first attempt went to 10.0.0.1 and failed
	fmt.Println(p.Pick(k).Addr)
	// Output:
	// 10.0.0.1:80 10.0.0.1:80 10.0.0.2:80 10.0.0.1:80 10.0.0.3:80 10.0.0.1:80 10.0.0.1:80
	// 10.0.0.2:80
}
