package socket

import "encoding/binary"

// Frame is a complete server-to-client WebSocket frame, header and payload. A server frame is
// not masked, so a message is framed once and the same bytes go to every socket of a room.
type Frame []byte

// TextFrame frames payload as one unmasked text frame.
func TextFrame(payload []byte) Frame {
	n := len(payload)
	f := make([]byte, 0, n+10)
	f = append(f, 0x81) // FIN, text
	switch {
	case n < 126:
		f = append(f, byte(n))
	case n < 1<<16:
		f = append(f, 126, byte(n>>8), byte(n))
	default:
		f = append(f, 127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	return append(f, payload...)
}

// Payload is the frame's payload (server frames are unmasked).
func (f Frame) Payload() []byte {
	switch f[1] & 0x7f {
	case 126:
		return f[4:]
	case 127:
		return f[10:]
	default:
		return f[2:]
	}
}

// PackFrames joins text frames into one, payloads separated by newlines.
func PackFrames(frames []Frame) Frame {
	n := len(frames) - 1
	for _, f := range frames {
		n += len(f.Payload())
	}
	p := make([]byte, 0, n)
	for i, f := range frames {
		if i > 0 {
			p = append(p, '\n')
		}
		p = append(p, f.Payload()...)
	}
	return TextFrame(p)
}
