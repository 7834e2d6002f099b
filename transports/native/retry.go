package native

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// RetryPolicy says how a failed model call is sent again: on 408, 409, 429
// and 5xx answers, and on a connection failure, as long as nothing of the
// answer had streamed yet. The wait is exponential with jitter
// (cenkalti/backoff), and never shorter than the endpoint's Retry-After.
type RetryPolicy struct {
	// MaxRetries is how many times one call is sent again (0: never).
	MaxRetries int
	// Initial and Max bound the exponential wait.
	Initial, Max time.Duration
	// MaxRetryAfter caps how long a Retry-After may make the loop wait; a
	// longer one fails the call at once with the endpoint's error.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is the policy of a transport without WithRetryPolicy.
var DefaultRetryPolicy = RetryPolicy{MaxRetries: 4, Initial: 500 * time.Millisecond, Max: 20 * time.Second, MaxRetryAfter: 2 * time.Minute}

// retrying sends one model call with the policy. call reports whether
// anything streamed (then a failure is final: the answer cannot be taken
// back). notify is told about each retry before its wait.
func retrying(ctx context.Context, p RetryPolicy, call func(ctx context.Context) (response, bool, error),
	notify func(attempt int, wait time.Duration, err error)) (response, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = max(p.Initial, time.Millisecond)
	b.MaxInterval = max(p.Max, b.InitialInterval)
	b.MaxElapsedTime = 0 // MaxRetries bounds it
	b.Reset()
	for attempt := 1; ; attempt++ {
		resp, streamed, err := call(ctx)
		if err == nil {
			return resp, nil
		}
		if streamed || ctx.Err() != nil || attempt > p.MaxRetries {
			return response{}, err
		}
		var ae *apiError
		wait := b.NextBackOff()
		if errors.As(err, &ae) {
			if !retryable(ae.status) {
				return response{}, err
			}
			if ae.retryAfter > 0 {
				if p.MaxRetryAfter > 0 && ae.retryAfter > p.MaxRetryAfter {
					return response{}, err
				}
				wait = max(wait, ae.retryAfter)
			}
		}
		if notify != nil {
			notify(attempt, wait, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return response{}, err
		case <-t.C:
		}
	}
}
