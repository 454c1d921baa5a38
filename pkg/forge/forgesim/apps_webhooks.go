// Installation webhooks: what the simulator sends when its installations change.

package forgesim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// hookDelivery is one webhook to send, built under s.mu and sent after.
type hookDelivery struct {
	hook  Webhook
	event string
	body  []byte
	id    string
}

// delivery builds event's webhook with payload (sender added), or returns
// nil when no webhook is configured; s.mu is held.
func (s *Sim) delivery(event string, payload object) *hookDelivery {
	if s.hook.URL == "" {
		return nil
	}
	payload["sender"] = userJSON(githubAPI, simAdmin)
	body, err := json.Marshal(payload)
	if err != nil {
		panic("forgesim: marshal webhook: " + err.Error())
	}
	s.hookSeq++
	return &hookDelivery{hook: s.hook, event: event, body: body, id: fmt.Sprintf("00000000-0000-4000-8000-%012d", s.hookSeq)}
}

// deliver POSTs d, signed, and waits for the answer (at most 10 s), so a
// control call returns once its webhook has been handled. Headers are
// GitHub's ("Webhook events and payloads", Delivery headers:
// https://docs.github.com/webhooks/webhook-events-and-payloads#delivery-headers).
func (s *Sim) deliver(d *hookDelivery) {
	if d == nil {
		return
	}
	mac := hmac.New(sha256.New, []byte(d.hook.Secret))
	mac.Write(d.body)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.hook.URL, bytes.NewReader(d.body))
	ok := false
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "GitHub-Hookshot/forgesim")
		req.Header.Set("X-GitHub-Event", d.event)
		req.Header.Set("X-GitHub-Delivery", d.id)
		req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
		req.Header.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(cmp.Or(d.hook.AppID, 1), 10))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		var resp *http.Response
		if resp, err = s.hookClient.Do(req); err == nil {
			resp.Body.Close()
			ok = resp.StatusCode/100 == 2
		}
	}
	s.mu.Lock()
	s.hooksSent++
	if !ok {
		s.hooksFailed++
	}
	s.mu.Unlock()
}
