package servicectl

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hetsched/hetsched/internal/engine"
)

// Scraping the replicas' own metrics (autoscale.metrics[].scrape): every
// ScrapeEvery, each ready replica's endpoint is read, at most maxScraping
// at once, each within scrapeTimeout and maxScrapeBody; the custom
// metric's value (the sum of its series) counts as if the replica had
// pushed it. A replica that does not answer has no value (the autoscaler
// leaves it out).
const (
	ScrapeEvery   = 15 * time.Second
	scrapeTimeout = 2 * time.Second
	maxScrapeBody = 4 << 20
	maxScraping   = 32
)

// scraper reads replicas' metrics.
type scraper struct {
	client *http.Client
	last   map[string]time.Time // service id -> its last scrape
}

func newScraper() *scraper {
	return &scraper{client: &http.Client{Timeout: scrapeTimeout, Transport: &http.Transport{
		DialContext:     (&net.Dialer{Timeout: scrapeTimeout}).DialContext,
		MaxIdleConns:    maxScraping,
		IdleConnTimeout: time.Minute,
	}}, last: map[string]time.Time{}}
}

// scrape reads service rec's scraped metrics from its ready replicas when
// ScrapeEvery has passed since the last time, and records them as pushed.
func (m *Manager) scrape(ctx context.Context, now time.Time, id string, rec *engine.ServiceRecord, l live) {
	a := rec.Spec.Autoscale
	if a == nil {
		return
	}
	var metrics []int
	for i, mt := range a.Metrics {
		if mt.Scrape != nil && mt.Custom != "" {
			metrics = append(metrics, i)
		}
	}
	if len(metrics) == 0 {
		return
	}
	ready := 0
	for _, r := range l.replicas {
		if r.Ready && r.Address != "" {
			ready++
		}
	}
	m.mu.Lock()
	due := ready > 0 && now.Sub(m.scr.last[id]) >= ScrapeEvery
	if due {
		m.scr.last[id] = now
	}
	m.mu.Unlock()
	if !due {
		return // nothing to read, or read lately
	}
	sem := make(chan struct{}, maxScraping)
	var wg sync.WaitGroup
	for j, r := range l.replicas {
		if !r.Ready || r.Address == "" {
			continue
		}
		for _, i := range metrics {
			mt := a.Metrics[i]
			url := "http://" + net.JoinHostPort(r.Address, strconv.Itoa(mt.Scrape.Port)) + mt.Scrape.PathOrDefault()
			replica := l.recs[j].Spec.ID
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				v, err := m.scr.read(ctx, url, mt.Custom)
				if err != nil {
					m.cfg.Logger.Debug("scrape", "service", id, "replica", replica, "err", err)
					return
				}
				m.record(id, replica, mt.Custom, v, now)
			}()
		}
	}
	wg.Wait()
}

// read fetches url and returns the sum of metric's series.
func (s *scraper) read(ctx context.Context, url, metric string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxScrapeBody))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	fam, ok := fams[metric]
	if !ok {
		return 0, fmt.Errorf("%s: no metric %s", url, metric)
	}
	sum := 0.0
	for _, mm := range fam.GetMetric() {
		switch {
		case mm.Gauge != nil:
			sum += mm.GetGauge().GetValue()
		case mm.Untyped != nil:
			sum += mm.GetUntyped().GetValue()
		case mm.Counter != nil:
			sum += mm.GetCounter().GetValue()
		}
	}
	if sum != sum || sum < 0 || sum > 1e15 {
		return 0, fmt.Errorf("%s: %s is %v", url, metric, sum)
	}
	return sum, nil
}
