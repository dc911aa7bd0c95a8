use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;

my $cfg = write_config(instances => 2);
my $bus = start_bus(config => $cfg, mode => 'unix');

my @closing = (
    [ 'not json',            "hello world\n",                          qr/input is not valid JSON/ ],
    [ 'truncated json',      qq({"id":1,"method":"x"\n),               qr/input is not valid JSON/ ],
    [ 'trailing garbage',    qq({"id":1,"method":"x"} x\n),            qr/input is not valid JSON/ ],
    [ 'array (batch)',       qq([{"id":1,"method":"x"}]\n),            qr/not a JSON object/ ],
    [ 'number',              "42\n",                                    qr/not a JSON object/ ],
    [ 'id is object',        qq({"id":{"a":1},"method":"x"}\n),        qr/id is neither a string nor a number/ ],
    [ 'id is bool',          qq({"id":true,"method":"x"}\n),           qr/id is neither/ ],
    [ 'sessionId number',    qq({"id":1,"method":"x","sessionId":5}\n), qr/sessionId is not a string/ ],
    [ 'method number',       qq({"id":1,"method":5}\n),                qr/method is not a string/ ],
    [ 'sessionId 257 bytes', jenc({ id => 1, method => 'x', sessionId => 'S' x 257 }) . "\n", qr/sessionId longer than 256/ ],
    [ 'id 129 bytes',        jenc({ id => 'I' x 129, method => 'x' }) . "\n", qr/id string longer than 128/ ],
);
for my $t (@closing) {
    my $c = $bus->connect;
    $c->send_raw($t->[1]);
    ok($c->is_closed(3), "$t->[0]: connection closed");
    like($bus->log_text, $t->[2], "$t->[0]: reason logged");
}
# boundaries: exactly 256 / 128 bytes are fine
{
    my $c = $bus->connect;
    $c->send({ id => 'I' x 128, method => 'x', sessionId => 'S' x 256 });
    my $m = $c->read_msg;
    is($m->{id}, 'I' x 128, '128-byte id and 256-byte sessionId accepted');
    # null id / null sessionId are treated as absent: forwarded, no pending
    $c->send(qq({"id":null,"method":"x","sessionId":null}));
    ok(!defined $c->read_line(0.5), 'id:null forwarded, response has no pending entry');
    ok($bus->wait_log(qr/response for unknown request id=none/), 'its response discarded as unknown');
    # the connection is still open
    $c->send({ id => 2, method => 'x' });
    is($c->read_msg->{id}, 2, 'connection still usable');
    # a client that sends a response (has result) is forwarded but not tracked
    $c->send({ id => 99, result => {} });
    ok(!defined $c->read_line(0.3), 'client response forwarded, nothing back');
    $c->close;
}
# other clients are unaffected by one client's garbage
{
    my $good = $bus->connect; my $bad = $bus->connect;
    $good->send({ id => 'g1', method => 'sleep', params => { ms => 200 } });
    $bad->send_raw("garbage\n");
    ok($bad->is_closed(3), 'bad client closed');
    is($good->read_msg->{id}, 'g1', 'good client still served');
    $good->close;
}
# malformed output from a worker: sessions invalidated, worker terminated and restarted
{
    my $c = $bus->connect;
    $c->send({ id => 1, method => 'x', sessionId => 'm1' });
    my $pid1 = $c->read_msg->{result}{pid};
    $c->send({ id => 2, method => 'garbage', sessionId => 'm1' });
    ok($bus->wait_log(qr/ERROR .*worker \d\/echo\(pid=$pid1\): malformed JSON on stdout/), 'malformed worker output logged as ERROR with worker context');
    ok($bus->wait_log(qr/worker \d\/echo\(pid=$pid1\): 1 session\(s\) invalidated/), 'session invalidated');
    ok($bus->wait_log(qr/discarding pending request id=2 .*worker exited/), 'pending request discarded with warning');
    ok($bus->wait_log(qr/restart 1\/5 in window scheduled/), 'restart scheduled');
    ok(wait_until(sub { kill 0, $pid1 } ? sub { !kill 0, $pid1 } : sub { 1 }), 'old worker gone');
    ok($bus->wait_log(qr/spawned.*\n(?:.*\n)*.*spawned.*\n(?:.*\n)*.*spawned/), 'worker respawned');
    # session m1 is new now: goes round robin; it works
    $c->send({ id => 3, method => 'x', sessionId => 'm1' });
    is($c->read_msg->{id}, 3, 'session re-created after invalidation');
    $c->close;
}
is($bus->stop, 0, 'exit 0');
done_testing;
