package jsonapi

import (
	"encoding/json"
	"net/http"

	"google.golang.org/protobuf/proto"
)

// errorBody is every error answer: one sentence a person can act on.
type errorBody struct {
	Error string `json:"error"`
}

// WriteError answers code with the sentence msg as {"error": msg}.
func WriteError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorBody{Error: msg})
}

// WriteMessage answers 200 with msg in the API's JSON dialect.
func WriteMessage(w http.ResponseWriter, msg proto.Message) {
	b, err := Marshal(msg)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "Internal error.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
