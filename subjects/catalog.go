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
	// Ranking says how the tools were found (absent on an error): RankingLexical,
	// RankingHybrid or RankingSelect.
	Ranking string `json:"ranking,omitempty"`
	Error   *Error `json:"error,omitempty"`
}

// The rankings of a SearchReply.
const (
	// RankingLexical: the lexical scores alone. Without an embeddings endpoint always; with
	// one, also while the catalog has no vectors yet, or the endpoint failed lately, is slow
	// or answers for another model (search never waits on it).
	RankingLexical = "lexical"
	// RankingHybrid: the lexical scores fused with the query's embedding.
	RankingHybrid = "hybrid"
	// RankingSelect: a "select:NAME[,NAME]" query, the named tools in the order named.
	RankingSelect = "select"
)

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

// ServersRequest is the payload of CatalogServers. The servers come in pages, sorted by name
// (bytewise): at most Limit of them, those whose name sorts after After. A reply with more
// servers to come says so in Next: ask again with After set to it.
type ServersRequest struct {
	V         int       `json:"v"`
	Principal Principal `json:"principal"`
	// Limit is the most servers in the reply: 0 means the service's default (100), more than
	// its maximum (1000) or less than 0 is bad_request. A reply may hold fewer (what fits in
	// a NATS message) and still have a Next.
	Limit int `json:"limit,omitempty"`
	// After starts the page after this server name: the Next of the previous reply ("" = from
	// the first server). Any name works (a server removed since included).
	After string `json:"after,omitempty"`
}

// RejectedDefinition is a definition of a server the system refused to put in the catalog: by
// registrysync when listing it (Snapshot.Rejected), or by the catalog (a public-name
// collision, a definition without a usable name).
type RejectedDefinition struct {
	Kind Kind `json:"kind"`
	// Name is the definition's name as listed, cut to 200 bytes; a configured secret in it is
	// "[redacted]" (code secret_in_name); "" when it has none.
	Name    string `json:"name,omitempty"`
	Code    string `json:"code"` // one of the codes of Snapshot.Rejected, or name_collision
	Message string `json:"message,omitempty"`
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
	// Rejected are the definitions of the server's last lists that were left out of the
	// catalog (at most 32, tools first), of the lists the principal may see; under a
	// configured policy only tools the principal may call (a name cut to 200 bytes: never).
	Rejected []RejectedDefinition `json:"rejected,omitempty"`
	// RejectedMore counts the rejected definitions past those listed. Under a configured
	// policy it leaves out the tools the catalog did not keep (past 32 a list): their names
	// are unknown, so whether the principal may see them cannot be told (it still counts
	// prompts and resources, and tools it may call past the 32 shown).
	RejectedMore int `json:"rejectedMore,omitempty"`
}

// ServersReply answers CatalogServers.
type ServersReply struct {
	V       int             `json:"v"`
	Servers []ServerSummary `json:"servers"`
	// Next is set when servers the principal may see come after this page: the After of the
	// request for the next one (the name of the last server of this page).
	Next  string `json:"next,omitempty"`
	Error *Error `json:"error,omitempty"`
}
