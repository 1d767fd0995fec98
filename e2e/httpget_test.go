package e2e

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// suiteHTTP is the suite's client for the HTTP endpoints it reads (serve's,
// the kubelet's read-only port, Prometheus's API): a server that stops
// answering fails the request, never the suite's deadline.
var suiteHTTP = &http.Client{Timeout: 30 * time.Second}

// maxHTTPBody bounds what the suite reads of one answer: a report of the
// chaos run's node is a few MiB.
const maxHTTPBody = 64 << 20

// httpGet GETs url and returns its body, read up to maxHTTPBody; an answer
// other than 200 is an error that quotes the start of the body (which is
// returned too: serve's /healthz says there why it is failing).
func httpGet(url string) ([]byte, error) {
	resp, err := suiteHTTP.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, body)
	}
	return body, err
}
