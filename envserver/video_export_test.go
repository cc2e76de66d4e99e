package envserver

import "context"

// EncodeEpisodeVideo encodes episode id's video into out as the route
// does, past the cache, and returns how many positions it encoded.
func EncodeEpisodeVideo(s *Server, id, out string) (frames int, err error) {
	t, err := s.episode(id)
	if err != nil {
		return 0, err
	}
	st, err := s.encodeVideo(context.Background(), t, out)
	return st.frames, err
}
