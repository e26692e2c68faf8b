module upstreamgolden

go 1.26.8

require github.com/ardanlabs/jinja v1.8.0
