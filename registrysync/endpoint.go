package registrysync

import (
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// msgRequest is a micro.Request over a message of a plain queue subscription: the relist and
// dispatch endpoints of each server are such subscriptions (in the service's queue group), so
// that Remove can end them one server at a time, which a micro service's endpoints cannot. The
// answers are the same as micro's (error headers Nats-Service-Error and -Code).
type msgRequest struct{ m *nats.Msg }

var _ micro.Request = msgRequest{}

func (r msgRequest) Respond(data []byte, opts ...micro.RespondOpt) error {
	out := &nats.Msg{Data: data}
	for _, o := range opts {
		o(out)
	}
	return r.m.RespondMsg(out)
}

func (r msgRequest) RespondJSON(v any, opts ...micro.RespondOpt) error {
	data, err := json.Marshal(v)
	if err != nil {
		return micro.ErrMarshalResponse
	}
	return r.Respond(data, opts...)
}

func (r msgRequest) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	if code == "" || description == "" {
		return errors.Join(micro.ErrArgRequired, errors.New("error code and description"))
	}
	out := &nats.Msg{Data: data, Header: nats.Header{micro.ErrorHeader: {description}, micro.ErrorCodeHeader: {code}}}
	for _, o := range opts {
		o(out)
	}
	return r.m.RespondMsg(out)
}

func (r msgRequest) Data() []byte           { return r.m.Data }
func (r msgRequest) Headers() micro.Headers { return micro.Headers(r.m.Header) }
func (r msgRequest) Subject() string        { return r.m.Subject }
func (r msgRequest) Reply() string          { return r.m.Reply }
