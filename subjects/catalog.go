package subjects

import "encoding/json"

// Detail levels of catalog answers.
const (
	DetailName    = "name"
	DetailSummary = "summary"
	DetailFull    = "full"
)

// Freshness states of a catalog entry.
const (
	StateFresh       = "fresh"
	StateStale       = "stale"
	StateUnavailable = "unavailable"
	StateRemoved     = "removed"
	StateRevoked     = "revoked"
)

// SearchRequest is the payload of CatalogSearch.
type SearchRequest struct {
	V         int       `json:"v"`
	Query     string    `json:"query"` // text, or "select:NAME[,NAME]"
	K         int       `json:"k,omitempty"`
	Detail    string    `json:"detail,omitempty"` // name | summary (default) | full
	Principal Principal `json:"principal"`
	Servers   []string  `json:"servers,omitempty"` // only these servers
	Tags      []string  `json:"tags,omitempty"`    // only tools with every tag, e.g. "read-only"
	// IncludeUnavailable also returns unavailable and stale tools (never removed or revoked ones).
	IncludeUnavailable bool `json:"includeUnavailable,omitempty"`
}

// ToolInfo is one catalog entry at some detail level.
type ToolInfo struct {
	Name         string          `json:"name"` // public name server__tool
	Server       string          `json:"server,omitempty"`
	Tool         string          `json:"tool,omitempty"` // original name on the server
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	Score        float64         `json:"score,omitempty"`
	Labels       []string        `json:"labels,omitempty"` // permission and risk: read-only, destructive, needs-approval...
	State        string          `json:"state,omitempty"`
	StateReason  string          `json:"stateReason,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Definition   json.RawMessage `json:"definition,omitempty"` // the raw definition as listed (full)
	CacheScope   string          `json:"cacheScope,omitempty"`
	TTLMs        *int64          `json:"ttlMs,omitempty"`
	ListedAt     string          `json:"listedAt,omitempty"`
}

// SearchReply answers CatalogSearch.
type SearchReply struct {
	V     int        `json:"v"`
	Tools []ToolInfo `json:"tools"`
	Error *Error     `json:"error,omitempty"`
}

// DetailsRequest is the payload of CatalogDetails.
type DetailsRequest struct {
	V         int       `json:"v"`
	Names     []string  `json:"names"`
	Principal Principal `json:"principal"`
}

// DetailsReply answers CatalogDetails; a name the principal may not see is reported as not_found.
type DetailsReply struct {
	V     int        `json:"v"`
	Tools []ToolInfo `json:"tools"`
	Error *Error     `json:"error,omitempty"`
}

// ServersRequest is the payload of CatalogServers.
type ServersRequest struct {
	V         int       `json:"v"`
	Principal Principal `json:"principal"`
}

// ServerSummary is one server in a ServersReply.
type ServerSummary struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Status      string `json:"status"`
	Reason      string `json:"reason,omitempty"`
	Tools       int    `json:"tools"`
	Prompts     int    `json:"prompts"`
	Resources   int    `json:"resources"`
	Transport   string `json:"transport,omitempty"`
	Protocol    string `json:"protocol,omitempty"`
}

// ServersReply answers CatalogServers.
type ServersReply struct {
	V       int             `json:"v"`
	Servers []ServerSummary `json:"servers"`
	Error   *Error          `json:"error,omitempty"`
}
