package rollout

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/aci/dialect"
	"github.com/shinken-rl/shinken/envserver/api"
)

// OpenAI is a policy backed by any OpenAI-compatible chat-completions
// endpoint (OpenAI, vLLM, SGLang, llama.cpp...). Each turn sends the whole
// conversation so far with the current screenshot as an image part; the
// reply's text goes to the server in Dialect. When the endpoint returns
// token ids (vLLM's return_token_ids: prompt_token_ids and choices[].token_ids)
// and logprobs, they are recorded as the step's tokens.
type OpenAI struct {
	URL     string // base URL, e.g. http://127.0.0.1:8000/v1 (…/chat/completions is added)
	Model   string
	APIKey  string
	Dialect string // one of dialect.Names but auto; default pyautogui
	// Coords is the coordinate space the model writes in, declared on each
	// step: screen, frame, norm, norm1000, WxH (an image space) or
	// smart-resize (the image a Qwen2.5-VL-style processor makes of each
	// delivered frame). Empty: the dialect's default, left to the server.
	Coords      string
	System      string // system prompt; default one for the dialect
	MaxTokens   int    // default 1024
	Temperature float64
	// TokenIDs asks for token ids (return_token_ids, a vLLM extension that
	// OpenAI itself rejects) and logprobs.
	TokenIDs bool
	// MaxImages keeps only the last N screenshots in the conversation (older
	// ones become a text placeholder); 0 keeps all. Dropping images changes
	// earlier prompt text, which the verl export flags as token drift.
	MaxImages int
	// Observe is what the model reads each turn: frame (the screenshot;
	// default), a11y (the accessibility tree's text, no image) or both.
	// The tree comes from observing with observe.a11y (ObserveTree).
	Observe string
	HTTP    *http.Client // default: 3-minute timeout
	// Retries of a call that failed with a transport error, 429 or 5xx; default 2.
	Retries int
}

// Start implements Policy.
func (p *OpenAI) Start(_ context.Context, task api.TaskInfo, _ int64) (Agent, error) {
	if p.URL == "" || p.Model == "" {
		return nil, errors.New("openai policy: URL and Model are required")
	}
	d := p.Dialect
	if d == "" {
		d = "pyautogui"
	}
	mode, err := parseCoordsMode(p.Coords)
	if err != nil {
		return nil, fmt.Errorf("openai policy: %w", err)
	}
	sys := p.System
	if sys == "" {
		sys = SystemPrompt(d)
	}
	return &openaiAgent{p: p, dialect: d, coords: mode, msgs: []chatMessage{{Role: "system", Content: sys}}}, nil
}

type openaiAgent struct {
	p       *OpenAI
	dialect string
	coords  coordsMode
	msgs    []chatMessage
}

// chatMessage is one chat message; Content is a string or a list of parts.
type chatMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatRequest struct {
	Model          string        `json:"model"`
	Messages       []chatMessage `json:"messages"`
	MaxTokens      int           `json:"max_tokens,omitempty"`
	Temperature    float64       `json:"temperature"`
	Logprobs       bool          `json:"logprobs,omitempty"`
	ReturnTokenIDs bool          `json:"return_token_ids,omitempty"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content   *string           `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		Logprobs     *struct {
			Content []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
		TokenIDs []int `json:"token_ids"`
	} `json:"choices"`
	PromptTokenIDs []int `json:"prompt_token_ids"`
}

// Act implements Agent.
func (a *openaiAgent) Act(ctx context.Context, turn Turn) (Decision, error) {
	var parts []contentPart
	text := fmt.Sprintf("Step %d.", turn.Step+1)
	if turn.Step == 0 {
		text = "Task: " + turn.Task.Instruction + "\n" + text
	}
	if turn.LastError != nil {
		text += fmt.Sprintf(" Your last action failed: %s: %s.", turn.LastError.Code, turn.LastError.Message)
	}
	space, send, err := a.coords.space(a.dialect, turn.Obs)
	if err != nil {
		return Decision{}, fmt.Errorf("openai policy: %w", err)
	}
	text += " " + coordsText(space, turn.Obs)
	parts = append(parts, contentPart{Type: "text", Text: text})
	if tp, ok := treePart(a.dialect, turn.Obs); ok && a.p.Observe != ObserveFrame && a.p.Observe != "" {
		parts = append(parts, tp)
	}
	if turn.Frame != nil && turn.Obs != nil && a.p.Observe != ObserveA11y {
		mime := "image/png"
		switch turn.Obs.Format {
		case aci.FormatJPEG:
			mime = "image/jpeg"
		case aci.FormatPNG:
		default:
			return Decision{}, fmt.Errorf("openai policy: cannot send a %q frame as an image; observe png or jpeg", turn.Obs.Format)
		}
		parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{
			URL: "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(turn.Frame)}})
	}
	a.msgs = append(a.msgs, chatMessage{Role: "user", Content: parts})
	a.trimImages()
	resp, err := a.p.complete(ctx, chatRequest{Model: a.p.Model, Messages: a.msgs, MaxTokens: a.p.maxTokens(),
		Temperature: a.p.Temperature, Logprobs: a.p.TokenIDs, ReturnTokenIDs: a.p.TokenIDs})
	if err != nil {
		return Decision{}, err
	}
	if len(resp.Choices) == 0 {
		return Decision{}, errors.New("openai policy: reply has no choices")
	}
	ch := resp.Choices[0]
	d := Decision{Dialect: a.dialect}
	if send {
		d.Coords = space.Wire()
	}
	switch {
	case ch.Message.Content != nil && strings.TrimSpace(*ch.Message.Content) != "":
		d.Text = *ch.Message.Content
	case len(ch.Message.ToolCalls) > 0: // native function calling: the server's tool_calls, as JSON
		b, _ := json.Marshal(map[string]any{"tool_calls": ch.Message.ToolCalls})
		d.Text = string(b)
		if a.dialect != dialect.Qwen { // the qwen dialect reads tool_calls itself
			// The json dialect reads them; the model still meant its own space.
			d.Dialect, d.Coords = dialect.JSON, space.Wire()
		}
	default:
		d.Text = ""
	}
	a.msgs = append(a.msgs, chatMessage{Role: "assistant", Content: d.Text})
	if len(resp.PromptTokenIDs) > 0 && len(ch.TokenIDs) > 0 {
		tk := &api.Tokens{PromptIDs: resp.PromptTokenIDs, ResponseIDs: ch.TokenIDs, FinishReason: ch.FinishReason}
		if ch.Logprobs != nil && len(ch.Logprobs.Content) == len(ch.TokenIDs) {
			for _, lp := range ch.Logprobs.Content {
				tk.ResponseLogprobs = append(tk.ResponseLogprobs, lp.Logprob)
			}
		}
		d.Tokens = tk
	}
	return d, nil
}

// trimImages replaces all but the last MaxImages screenshots with text.
func (a *openaiAgent) trimImages() {
	if a.p.MaxImages <= 0 {
		return
	}
	seen := 0
	for i := len(a.msgs) - 1; i >= 0; i-- {
		parts, ok := a.msgs[i].Content.([]contentPart)
		if !ok {
			continue
		}
		for j := range parts {
			if parts[j].Type != "image_url" {
				continue
			}
			seen++
			if seen > a.p.MaxImages {
				parts[j] = contentPart{Type: "text", Text: "[earlier screenshot omitted]"}
			}
		}
	}
}

func (p *OpenAI) maxTokens() int {
	if p.MaxTokens > 0 {
		return p.MaxTokens
	}
	return 1024
}

// complete posts one chat-completions request, retrying transport errors,
// 429 and 5xx with backoff.
func (p *OpenAI) complete(ctx context.Context, req chatRequest) (*chatResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hc := p.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 3 * time.Minute}
	}
	retries := p.Retries
	if retries == 0 {
		retries = 2
	}
	endpoint := strings.TrimRight(p.URL, "/")
	if !strings.HasSuffix(endpoint, "/chat/completions") {
		endpoint += "/chat/completions"
	}
	var lastErr error
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		hr.Header.Set("Content-Type", "application/json")
		if p.APIKey != "" {
			hr.Header.Set("Authorization", "Bearer "+p.APIKey)
		}
		r, err := hc.Do(hr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = fmt.Errorf("openai policy: %w", err)
			continue
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		r.Body.Close()
		if err != nil {
			lastErr = fmt.Errorf("openai policy: reading reply: %w", err)
			continue
		}
		if r.StatusCode == http.StatusTooManyRequests || r.StatusCode >= 500 {
			lastErr = fmt.Errorf("openai policy: status %d: %.200s", r.StatusCode, b)
			continue
		}
		if r.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("openai policy: status %d: %.200s", r.StatusCode, b)
		}
		var cr chatResponse
		if err := json.Unmarshal(b, &cr); err != nil {
			return nil, fmt.Errorf("openai policy: decoding reply: %w", err)
		}
		return &cr, nil
	}
	return nil, fmt.Errorf("%w (after %s attempts)", lastErr, strconv.Itoa(retries+1))
}
