package image

import "errors"

// ErrClosed is returned by every method of a Reader after Close.
var ErrClosed = errors.New("image: reader closed")
