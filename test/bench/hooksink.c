/*
 * hooksink.c
 *		Tiny HTTP/1.1 webhook receiver for the benchmark suite: takes the JSON
 *		webhooks the extension POSTs through libcurl, notes when each arrived
 *		and answers with an empty 200.
 *
 *	usage: hooksink --port-file FILE --out FILE [--port N]
 *					[--hang-path PREFIX] [--delay-ms N]
 *
 * It listens on 127.0.0.1:N (default 0: the kernel picks a port), then
 * writes the port as "N\n" to --port-file.  Each complete request adds a
 * line to an in-memory log:
 *
 *		<arrival_us> <task_id> <attempt>
 *
 * arrival_us is CLOCK_REALTIME in microseconds when the request was fully
 * parsed; task_id is the Idempotency-Key header (-1 if absent), attempt the
 * X-Delaysched-Attempt header (0 if absent), both cut to 63 bytes with
 * blanks and controls turned into '_'.  SIGTERM or SIGINT writes the log, in
 * arrival order, to --out and exits 0.  Both files are written as FILE.tmp
 * and renamed into place.
 *
 * The reply, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", is sent at
 * once or --delay-ms after arrival.  A request whose path starts with
 * --hang-path is logged but never answered, nor is anything after it on that
 * connection (replies must stay in order).  "Connection: close" (or HTTP/1.0
 * without keep-alive) adds that header to the reply and closes.  Malformed
 * requests get 400, POST/PUT/PATCH without Content-Length or anything with
 * Transfer-Encoding 411, requests over 1 MiB 413; these close too.
 *
 * One thread and one epoll set: client sockets are non-blocking and
 * edge-triggered, signals come through a signalfd.  All delays are equal, so
 * delayed replies form a FIFO already in due order, whose head bounds the
 * epoll_wait() timeout.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define INIT_BUF	4096			/* first input buffer of a connection */
#define MAX_BUF		(1024 * 1024)	/* largest request accepted */
#define MAX_EVENTS	1024			/* epoll_wait() batch */
#define FIELD_LEN	64				/* logged header value, with its NUL */

/* is ch a blank, a control character or not ASCII? */
#define NOT_GRAPH(ch) \
	((unsigned char) (ch) <= ' ' || (unsigned char) (ch) >= 0x7f)
/* is the header name at line, nlen bytes long, lit (any case)? */
#define NAME_IS(lit) \
	(nlen == sizeof(lit) - 1 && strncasecmp(line, lit, nlen) == 0)

typedef struct Conn
{
	int			fd;				/* -1 once closed */
	char	   *in;				/* received, not yet consumed */
	size_t		inlen,
				incap;
	char	   *out;			/* replies not yet sent; outoff are sent */
	size_t		outlen,
				outoff,
				outcap;
	int			npending;		/* its replies in the timer queue; the Conn
								 * is freed only when this is 0 */
	bool		rdeof;			/* the peer will send nothing more */
	bool		closing;		/* take no more requests, close when done */
	bool		hung;			/* a request was left unanswered */
} Conn;

typedef struct Timer			/* a reply waiting out --delay-ms */
{
	int64_t		due;			/* CLOCK_MONOTONIC microseconds */
	Conn	   *conn;
	int			code;
	bool		close;
} Timer;

typedef struct Request			/* what parse_head() found */
{
	size_t		clen;
	bool		has_clen;
	bool		close;
	bool		hang;
	char		key[FIELD_LEN];
	char		attempt[FIELD_LEN];
} Request;

static const char *hang_path = NULL;
static size_t hang_len = 0;
static int64_t delay_us = 0;

static Timer *tq = NULL;		/* ring buffer of delayed replies */
static size_t tq_cap = 0,
			tq_head = 0,
			tq_len = 0;

static char *logbuf = NULL;		/* the request log, as text */
static size_t loglen = 0,
			logcap = 0;
static unsigned long long nrequests = 0,
			nconnections = 0;

/* Report a failed system call and exit 1. */
static void
die(const char *what)
{
	fprintf(stderr, "hooksink: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* realloc() that exits when memory runs out. */
static void *
xrealloc(void *p, size_t n)
{
	if ((p = realloc(p, n)) == NULL)
		die("realloc");
	return p;
}

/* Parse a decimal option value in [0, max], or exit with the usage. */
static long
parse_num(const char *s, long max)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0 || v > max)
	{
		fprintf(stderr, "hooksink: invalid number \"%s\"\n", s);
		exit(1);
	}
	return v;
}

/* Read the given clock in microseconds. */
static int64_t
now_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Write len bytes to path.tmp, then rename it over path. */
static void
write_file_atomic(const char *path, const char *data, size_t len)
{
	char		tmp[4096];
	int			fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		die(tmp);
	while (len > 0)
	{
		ssize_t		n = write(fd, data, len);

		if (n < 0 && errno != EINTR)
			die(tmp);
		if (n > 0)
		{
			data += n;
			len -= (size_t) n;
		}
	}
	if (close(fd) != 0 || rename(tmp, path) != 0)
		die(path);
}

/* Free a closed connection's memory. */
static void
conn_free(Conn *c)
{
	free(c->in);
	free(c->out);
	free(c);
}

/* Append a response with the given status to the connection's output. */
static void
queue_reply(Conn *c, int code, bool close)
{
	const char *reason = code == 200 ? "OK" :
		code == 411 ? "Length Required" :
		code == 413 ? "Content Too Large" : "Bad Request";
	char		line[128];
	size_t		n;

	n = (size_t) snprintf(line, sizeof(line),
						  "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n%s\r\n",
						  code, reason, close ? "Connection: close\r\n" : "");
	if (c->outlen + n > c->outcap)
	{
		c->outcap = c->outcap ? c->outcap * 2 : 256;
		c->out = xrealloc(c->out, c->outcap);
	}
	memcpy(c->out + c->outlen, line, n);
	c->outlen += n;
}

/*
 * Answer a request: at once, or with --delay-ms through the timer queue.
 * Nothing more is sent on a connection with a hung request.
 */
static void
respond(Conn *c, int code, bool close)
{
	Timer	   *t;

	if (c->hung)
		return;
	if (delay_us == 0)
	{
		queue_reply(c, code, close);
		return;
	}
	if (tq_len == tq_cap)
	{
		size_t		ncap = tq_cap ? tq_cap * 2 : 1024;
		Timer	   *nq = xrealloc(NULL, ncap * sizeof(Timer));

		for (size_t i = 0; i < tq_len; i++)
			nq[i] = tq[(tq_head + i) % tq_cap];
		free(tq);
		tq = nq;
		tq_cap = ncap;
		tq_head = 0;
	}
	t = &tq[(tq_head + tq_len++) % tq_cap];
	t->due = now_us(CLOCK_MONOTONIC) + delay_us;
	t->conn = c;
	t->code = code;
	t->close = close;
	c->npending++;
}

/*
 * Send what the socket takes, then close the connection if sending failed
 * or it is finished: no request will come or be taken and no reply is left,
 * buffered or in the timer queue.  Closing the fd also takes it out of the
 * epoll set; the memory goes once no timer refers to it.  c may be freed.
 */
static void
conn_settle(Conn *c)
{
	bool		broken = false;

	while (c->outoff < c->outlen && !broken)
	{
		ssize_t		n = send(c->fd, c->out + c->outoff,
							 c->outlen - c->outoff, MSG_NOSIGNAL);

		if (n >= 0)
			c->outoff += (size_t) n;
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;				/* EPOLLOUT brings us back */
		else
			broken = (errno != EINTR);
	}
	c->outoff = c->outlen = 0;
	if (broken || ((c->rdeof || c->closing) && c->npending == 0))
	{
		close(c->fd);
		c->fd = -1;
		if (c->npending == 0)
			conn_free(c);
	}
}

/* Copy a header value into dst as one word of at most FIELD_LEN - 1 bytes. */
static void
copy_field(char *dst, const char *v, size_t len)
{
	if (len >= FIELD_LEN)
		len = FIELD_LEN - 1;
	for (size_t i = 0; i < len; i++)
		dst[i] = ((unsigned char) v[i] <= ' ' || v[i] == 0x7f) ? '_' : v[i];
	dst[len] = '\0';
}

/*
 * Parse a request head of n bytes (the final CRLFCRLF excluded).  Returns 0
 * and fills *r, or the error status to answer with.
 */
static int
parse_head(const char *p, size_t n, Request *r)
{
	const char *end = p + n;
	const char *eol = memmem(p, n, "\r\n", 2);
	const char *sp1,
			   *sp2,
			   *q;
	size_t		mlen;
	bool		body_method,
				has_te = false,
				keepalive = false;

	memset(r, 0, sizeof(*r));
	strcpy(r->key, "-1");
	strcpy(r->attempt, "0");
	if (eol == NULL)
		eol = end;

	/* request line: METHOD SP TARGET SP HTTP/1.x */
	if ((sp1 = memchr(p, ' ', (size_t) (eol - p))) == NULL || sp1 == p ||
		(sp2 = memchr(sp1 + 1, ' ', (size_t) (eol - sp1 - 1))) == NULL ||
		sp2 == sp1 + 1 || eol - sp2 != 9 ||
		memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
		return 400;
	for (q = p; q < sp1; q++)
		if (*q < 'A' || *q > 'Z')
			return 400;
	for (q = sp1 + 1; q < sp2; q++)
		if (NOT_GRAPH(*q))
			return 400;
	mlen = (size_t) (sp1 - p);
	body_method = (mlen == 4 && memcmp(p, "POST", 4) == 0) ||
		(mlen == 3 && memcmp(p, "PUT", 3) == 0) ||
		(mlen == 5 && memcmp(p, "PATCH", 5) == 0);
	r->hang = hang_len > 0 && (size_t) (sp2 - sp1 - 1) >= hang_len &&
		memcmp(sp1 + 1, hang_path, hang_len) == 0;

	/* header lines: NAME ":" OWS VALUE OWS */
	while (eol < end)
	{
		const char *line = eol + 2;
		const char *colon,
				   *v,
				   *ve;
		size_t		nlen;
		char		lower[FIELD_LEN];

		if ((eol = memmem(line, (size_t) (end - line), "\r\n", 2)) == NULL)
			eol = end;
		if ((colon = memchr(line, ':', (size_t) (eol - line))) == NULL ||
			colon == line)
			return 400;
		for (q = line; q < colon; q++)
			if (NOT_GRAPH(*q))
				return 400;		/* also rejects obsolete line folding */
		for (q = colon; q < eol; q++)
			if (*q == '\r' || *q == '\n' || *q == '\0')
				return 400;
		nlen = (size_t) (colon - line);
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
			;

		if (NAME_IS("content-length"))
		{
			size_t		val = 0;

			if (v == ve)
				return 400;
			for (q = v; q < ve; q++)
			{
				if (*q < '0' || *q > '9')
					return 400;
				if (val <= MAX_BUF)		/* saturate, it will be 413 */
					val = val * 10 + (size_t) (*q - '0');
			}
			if (r->has_clen && r->clen != val)
				return 400;
			r->has_clen = true;
			r->clen = val;
		}
		else if (NAME_IS("transfer-encoding"))
			has_te = true;
		else if (NAME_IS("connection"))
		{
			/* a loose token test is enough for the values clients send */
			copy_field(lower, v, (size_t) (ve - v));
			r->close |= strcasestr(lower, "close") != NULL;
			keepalive |= strcasestr(lower, "keep-alive") != NULL;
		}
		else if (NAME_IS("idempotency-key") && ve > v)
			copy_field(r->key, v, (size_t) (ve - v));
		else if (NAME_IS("x-delaysched-attempt") && ve > v)
			copy_field(r->attempt, v, (size_t) (ve - v));
	}

	if (has_te || (body_method && !r->has_clen))
		return 411;
	if (sp2[8] == '0' && !keepalive)
		r->close = true;		/* HTTP/1.0 */
	return 0;
}

/*
 * Consume every complete request in the connection's input, logging and
 * answering each; a trailing partial request stays for the next read.
 */
static void
parse_requests(Conn *c)
{
	size_t		pos = 0;

	while (!c->closing && pos < c->inlen)
	{
		char	   *start = c->in + pos;
		size_t		avail = c->inlen - pos;
		char	   *hend;
		size_t		hlen;
		Request		req;
		int			rc;

		if ((hend = memmem(start, avail, "\r\n\r\n", 4)) == NULL)
			break;				/* head incomplete */
		hlen = (size_t) (hend - start) + 4;
		rc = parse_head(start, hlen - 4, &req);
		if (rc == 0 && req.clen > MAX_BUF - hlen)
			rc = 413;
		if (rc != 0)
		{
			respond(c, rc, true);
			c->closing = true;
			break;
		}
		if (avail - hlen < req.clen)
			break;				/* body incomplete */
		pos += hlen + req.clen;

		if (logcap - loglen < 32 + 2 * FIELD_LEN)
		{
			logcap = logcap ? logcap * 2 : 1024 * 1024;
			logbuf = xrealloc(logbuf, logcap);
		}
		loglen += (size_t) snprintf(logbuf + loglen, logcap - loglen,
									"%lld %s %s\n",
									(long long) now_us(CLOCK_REALTIME),
									req.key, req.attempt);
		nrequests++;

		if (req.hang)
			c->hung = true;
		else
		{
			respond(c, 200, req.close);
			c->closing = req.close;
		}
	}

	if (c->closing)
		c->inlen = 0;
	else if (pos > 0)
	{
		memmove(c->in, c->in + pos, c->inlen - pos);
		c->inlen -= pos;
	}
}

/*
 * Read all there is (the socket is edge-triggered), parse it, then settle
 * the connection.  c may be freed.
 */
static void
conn_read(Conn *c)
{
	while (!c->closing && !c->rdeof)
	{
		ssize_t		n;

		if (c->inlen == c->incap)
		{
			if (c->incap >= MAX_BUF)
			{
				respond(c, 413, true);
				c->closing = true;
				break;
			}
			c->incap = c->incap ? c->incap * 2 : INIT_BUF;
			if (c->incap > MAX_BUF)
				c->incap = MAX_BUF;
			c->in = xrealloc(c->in, c->incap);
		}
		n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
		if (n > 0)
		{
			c->inlen += (size_t) n;
			parse_requests(c);
		}
		else if (n == 0)
			c->rdeof = true;
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		else if (errno != EINTR)
			c->rdeof = true;	/* reset: sending will fail and close */
	}
	conn_settle(c);
}

/* Accept all pending connections and add them to the epoll set. */
static void
accept_all(int ep, int lfd)
{
	static bool warned = false;
	int			fd;
	int			one = 1;

	while ((fd = accept4(lfd, NULL, NULL,
						 SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0 ||
		   errno == EINTR || errno == ECONNABORTED)
	{
		struct epoll_event ev;
		Conn	   *c;

		if (fd < 0)
			continue;
		(void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = xrealloc(NULL, sizeof(Conn));
		memset(c, 0, sizeof(Conn));
		c->fd = fd;
		nconnections++;
		ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
		ev.data.ptr = c;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
			die("epoll_ctl");
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && !warned)
	{
		fprintf(stderr, "hooksink: accept: %s\n", strerror(errno));
		warned = true;
	}
}

/*
 * Send every delayed reply that is due, and return the epoll_wait() timeout
 * in ms: until the next one is due (rounded up), or -1 if there is none.
 */
static int
run_timers(void)
{
	int64_t		now = now_us(CLOCK_MONOTONIC);

	while (tq_len > 0 && tq[tq_head].due <= now)
	{
		Timer		t = tq[tq_head];

		tq_head = (tq_head + 1) % tq_cap;
		tq_len--;
		t.conn->npending--;
		if (t.conn->fd >= 0)
		{
			queue_reply(t.conn, t.code, t.close);
			conn_settle(t.conn);
		}
		else if (t.conn->npending == 0)
			conn_free(t.conn);	/* closed meanwhile */
	}
	return tq_len ? (int) ((tq[tq_head].due - now + 999) / 1000) : -1;
}

/* Set up, run the event loop until SIGTERM or SIGINT, write the log. */
int
main(int argc, char **argv)
{
	const char *port_file = NULL;
	const char *out_file = NULL;
	long		port = 0;
	sigset_t	sigs;
	struct rlimit rl;
	struct sockaddr_in addr;
	socklen_t	alen = sizeof(addr);
	struct epoll_event ev;
	struct epoll_event evs[MAX_EVENTS];
	char		buf[16];
	int			one = 1;
	int			timeout = -1;
	int			lfd,
				sfd,
				ep;
	bool		running = true;

	for (int i = 1; i < argc; i += 2)
	{
		const char *val = argv[i + 1];

		if (val != NULL && strcmp(argv[i], "--port-file") == 0)
			port_file = val;
		else if (val != NULL && strcmp(argv[i], "--out") == 0)
			out_file = val;
		else if (val != NULL && strcmp(argv[i], "--port") == 0)
			port = parse_num(val, 65535);
		else if (val != NULL && strcmp(argv[i], "--hang-path") == 0)
			hang_len = strlen(hang_path = val);
		else if (val != NULL && strcmp(argv[i], "--delay-ms") == 0)
			delay_us = (int64_t) parse_num(val, 3600000) * 1000;
		else
		{
			port_file = NULL;	/* unknown option: print the usage */
			break;
		}
	}
	if (port_file == NULL || out_file == NULL)
	{
		fprintf(stderr, "usage: hooksink --port-file FILE --out FILE "
				"[--port N] [--hang-path PREFIX] [--delay-ms N]\n");
		return 1;
	}

	/* signals arrive through the event loop; raise the fd limit */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0 ||
		(sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		die("signalfd");
	signal(SIGPIPE, SIG_IGN);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max)
	{
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			fprintf(stderr, "hooksink: setrlimit: %s\n", strerror(errno));
	}

	/* listen, then publish the port */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket");
	(void) setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t) port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *) &addr, sizeof(addr)) != 0 ||
		listen(lfd, 4096) != 0 ||
		getsockname(lfd, (struct sockaddr *) &addr, &alen) != 0)
		die("bind/listen");
	snprintf(buf, sizeof(buf), "%d\n", (int) ntohs(addr.sin_port));
	write_file_atomic(port_file, buf, strlen(buf));

	if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("epoll_create1");
	ev.events = EPOLLIN;
	ev.data.ptr = &lfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0)
		die("epoll_ctl");
	ev.data.ptr = &sfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) != 0)
		die("epoll_ctl");

	/*
	 * Each client fd appears at most once per batch and is closed only while
	 * its own event is handled or in run_timers(), so a Conn pointer taken
	 * from the batch is never stale.
	 */
	while (running)
	{
		int			n = epoll_wait(ep, evs, MAX_EVENTS, timeout);

		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++)
		{
			if (evs[i].data.ptr == &lfd)
				accept_all(ep, lfd);
			else if (evs[i].data.ptr == &sfd)
				running = false;
			else if (evs[i].events &
					 (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				conn_read(evs[i].data.ptr);
			else
				conn_settle(evs[i].data.ptr);
		}
		timeout = run_timers();
	}

	write_file_atomic(out_file, logbuf ? logbuf : "", loglen);
	fprintf(stderr, "hooksink: %llu requests, %llu connections\n",
			nrequests, nconnections);
	return 0;
}
