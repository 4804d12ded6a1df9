package server

import (
	"testing"
	"time"
)

func TestRetryWindow(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		want    time.Duration
	}{
		{name: "default response_header_timeout", timeout: 30 * time.Second, want: time.Minute},
		{name: "short timeout keeps 10s", timeout: time.Second, want: 10 * time.Second},
		{name: "long timeout", timeout: 2 * time.Minute, want: 4 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryWindow(tt.timeout); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
