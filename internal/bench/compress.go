package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// checkCompressed asks url for its answer in coding and fails unless it
// comes so: a proxy whose configuration did not take would be measured
// sending answers as they are, doing less work than the others. The
// request names its Accept-Encoding itself, so that net/http neither
// adds its own nor decodes the answer.
func checkCompressed(ctx context.Context, client *http.Client, url, coding string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept-Encoding", coding)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: reading the answer: %w", url, err)
	}
	if ce := resp.Header.Get("Content-Encoding"); resp.StatusCode != 200 || ce != coding {
		return fmt.Errorf("GET %s with Accept-Encoding %s: got %d with Content-Encoding %q (%d bytes), want 200 in %s",
			url, coding, resp.StatusCode, ce, n, coding)
	}
	return nil
}
