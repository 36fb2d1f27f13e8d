package api

import "context"

// The whole-answer forms of the graph path, kept for tests as the reference the
// streamed encoders are checked against.

// planGraph is planGraphTensors with the response's Shardings and Explain filled in.
func (s *Server) planGraph(ctx context.Context, in *graphInput) (*GraphResponse, error) {
	resp, ta, err := s.planGraphTensors(ctx, in)
	if err != nil {
		return nil, err
	}
	return ta.fill(resp), nil
}

// encodeGraphJSON is encodeGraphTensors of r alone: it encodes r exactly as encodeJSON
// does.
func encodeGraphJSON(r *GraphResponse) ([]byte, error) {
	return encodeGraphTensors(r, nil)
}

// prepareGraphKeyed is prepareGraph of a JSON body with the plan id the graph route
// computes.
func prepareGraphKeyed(s *Server, body []byte) (*graphInput, error) {
	in, err := s.prepareGraph(context.Background(), body, nil)
	if err != nil {
		return nil, err
	}
	in.key, err = graphKey(in)
	return in, err
}
