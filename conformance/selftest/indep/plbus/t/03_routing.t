use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;

my $cfg = write_config(pools => [
    { id => 'p1', command => worker_cmd(), instances => 2 },
    { id => 'p2', command => worker_cmd(), instances => 1 },
]);
my $bus = start_bus(config => $cfg, mode => 'unix');
my $ca = $bus->connect; my $cb = $bus->connect;

# round robin over all three workers (two pools)
$ca->send(map { { jsonrpc => '2.0', id => $_, method => 'x' } } 1 .. 6);
my @r = sort { $a->{id} <=> $b->{id} } $ca->read_msgs(6);
is(scalar @r, 6, 'six responses');
my @pids = map { $_->{result}{pid} } @r;
my %u = map { $_ => 1 } @pids;
is(scalar keys %u, 3, 'three distinct workers used');
is_deeply([ @pids[3..5] ], [ @pids[0..2] ], 'strict rotation');

# session affinity
$ca->send(map { { id => "s$_", method => 'x', sessionId => 'sessA' } } 1 .. 5);
my @s = $ca->read_msgs(5);
my %sp = map { $_->{result}{pid} => 1 } @s;
is(scalar keys %sp, 1, 'same sessionId -> same worker');
is($s[0]{sessionId}, 'sessA', 'sessionId preserved');
# another client using the same sessionId goes to the same worker, responses come back to it
$cb->send({ id => 'b1', method => 'x', sessionId => 'sessA' });
my $bm = $cb->read_msg;
is($bm->{id}, 'b1', 'response to the sending client');
ok($sp{ $bm->{result}{pid} }, 'same worker for same session from another client');
# notification for sessA goes to the owner (a), not b
$cb->send({ id => 'b2', method => 'notify', sessionId => 'sessA' });
my $n = $ca->read_msg;
is($n->{method}, 'progress', 'session notification to owner');
is($cb->read_msg->{id}, 'b2', 'response still to requester');
ok(!defined $ca->read_line(0.3), 'nothing else to owner');

# params.sessionId (ACP style) is honoured for affinity and notifications
$cb->send(map { { id => "p$_", method => 'notify', params => { sessionId => 'acp-1', as_params => 1 } } } 1 .. 3);
my @bm = $cb->read_msgs(6);
my @notes = grep { ($_->{method} // '') eq 'progress' } @bm;
is(scalar @notes, 3, 'params.sessionId notifications routed to owner');
my %pp = map { $_->{result}{pid} => 1 } grep { $_->{id} } @bm;
is(scalar keys %pp, 1, 'params.sessionId affinity');

# id collisions across clients and types
$ca->send({ id => 1, method => 'sleep', params => { ms => 200 } });
$cb->send({ id => 1, method => 'sleep', params => { ms => 50 } });
$cb->send({ id => '1', method => 'y' });
my $ra = $ca->read_msg; my @rb = $cb->read_msgs(2);
is($ra->{id}, 1, 'client a gets its id 1');
is(scalar(@rb), 2, 'client b gets both');
ok(!defined $ca->read_line(0.3) && !defined $cb->read_line(0.1), 'no cross-delivery');

# id equality: 1.0 matches 1 (numeric value); worker replies with its own encoding
$ca->send(qq({"id":1.0,"method":"x"}));
my $l = $ca->read_line;
like($l, qr/"id":1(\.0)?\b/, 'fractional-form id routed back');

# unknown response id -> warn + discard; unroutable -> warn + discard
$ca->send({ id => 'w', method => 'wrongid' });
is($ca->read_msg->{id}, 'w', 'real response still delivered');
ok($bus->wait_log(qr/WARN .*response for unknown request id="no-such-id" discarded/), 'unknown id warned');
$ca->send({ id => 'u', method => 'unroutable' });
is($ca->read_msg->{id}, 'u', 'response after unroutable');
ok($bus->wait_log(qr/WARN .*unroutable message/), 'unroutable warned');
$ca->send({ id => 'no', method => 'nonobject' });
is($ca->read_msg->{id}, 'no', 'non-object worker output discarded, worker kept');
ok($bus->wait_log(qr/WARN .*not a JSON object/), 'non-object warned');
# duplicated response: second is unknown
$ca->send({ id => 'dup', method => 'reply_twice' });
is($ca->read_msg->{id}, 'dup', 'first reply');
ok(!defined $ca->read_line(0.3), 'second reply discarded');

# notification for unknown session discarded
$ca->send({ id => 'ns', method => 'notify', params => { target => 'nobody' } });
is($ca->read_msg->{id}, 'ns', 'response');
ok($bus->wait_log(qr/unknown session 'nobody'/), 'unknown session warned');

# client messages without id (notifications) are forwarded, no response
$ca->send({ method => 'notifications/initialized' });
ok(!defined $ca->read_line(0.3), 'no response to notification');

# client disconnect invalidates its sessions: new owner after reconnect gets notifications
$ca->close;
ok($bus->wait_log(qr/session\(s\) invalidated \(owning client disconnected\)/), 'sessions of a invalidated');
$cb->send({ id => 'z', method => 'notify', sessionId => 'sessA' });
my @z = $cb->read_msgs(2);
is(scalar(grep { ($_->{method} // '') eq 'progress' } @z), 1, 'sessA re-created, now owned by b');

# pending of a disconnected client: the late response is discarded
my $c = $bus->connect;
$c->send({ id => 'late', method => 'sleep', params => { ms => 300 } });
select undef, undef, undef, 0.1;
$c->close;
ok($bus->wait_log(qr/pending request\(s\) discarded \(client disconnected\)/), 'pending discarded on disconnect');
ok($bus->wait_log(qr/WARN .*response id="late" for client#\d+\(.*, which has disconnected, discarded/), 'late response discarded');
is($bus->stop, 0, 'exit 0');
ok(!-e $bus->{sock}, 'socket removed');
done_testing;
