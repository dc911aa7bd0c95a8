use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;

my $bus = start_bus(config => write_config(instances => 1), mode => 'unix', log_level => 'info');
{   # STDIO_BUS_MAX_SESSIONS = 1024
    my $c = $bus->connect;
    $c->send(map { { method => 'noreply', sessionId => "s$_" } } 1 .. 1024);
    $c->send({ id => 'check', method => 'ping', sessionId => 's1' });
    is($c->read_msg(10)->{id}, 'check', '1024 sessions created, existing session still routed');
    $c->send({ id => 'over', method => 'ping', sessionId => 's1025' });
    ok($bus->wait_log(qr/WARN .*session table full \(1024\); message for new session 's1025' dropped/), 'session 1025 dropped with warning');
    ok(!defined $c->read_line(0.3), 'no response for dropped message');
    $c->send({ id => 'nosess', method => 'ping' });
    is($c->read_msg->{id}, 'nosess', 'session-less messages still flow');
    $c->close;
    ok($bus->wait_log(qr/1024 session\(s\) invalidated \(owning client disconnected\)/), 'all invalidated on disconnect');
    my $d = $bus->connect;
    $d->send({ id => 'again', method => 'ping', sessionId => 's1025' });
    is($d->read_msg->{id}, 'again', 'room for new sessions again');
    $d->close;
}
{   # STDIO_BUS_MAX_PENDING_REQUESTS = 4096: further requests are held back (input paused), not lost
    my $c = $bus->connect;
    $c->send(map { { id => $_, method => 'noreply' } } 1 .. 4096);
    $c->send({ id => 4097, method => 'ping' });
    ok($bus->wait_log(qr/WARN .*pending request table full \(4096\); pausing input until requests complete \(request id=4097 held back\)/, 10), 'request 4097 held back');
    ok(!defined $c->read_line(0.3), 'not forwarded while the table is full');
    my $d = $bus->connect;
    $d->send({ method => 'noreply' }, { id => 'd', method => 'ping' });
    ok(!defined $d->read_line(0.5), 'other clients\' requests also wait (global table)');
    $c->close;
    ok($bus->wait_log(qr/4096 pending request\(s\) discarded/), 'pending discarded on disconnect');
    my $m = $d->read_msg(5);
    is($m && $m->{id}, 'd', 'held-back request of the other client delivered once there is room');
    $d->send({ id => 'd2', method => 'ping' });
    is($d->read_msg->{id}, 'd2', 'requests accepted again');
    $d->close;
}
# The unanswered requests of a client that left stay on their worker until
# answered (6.3.1, READINGS §7), so the next clients use ids of their own.
{   # the held-back request of the same client goes through when a slot frees up
    my $c = $bus->connect;
    $c->send(map { { id => $_, method => 'noreply' } } 10001 .. 14095);
    $c->send({ id => 'p1', method => 'sleep', params => { ms => 300 } }, { id => 'p2', method => 'ping' });
    my @m = $c->read_msgs(2, 10);
    is_deeply([ map { $_->{id} } @m ], [ 'p1', 'p2' ], 'request 4097 forwarded after request 4096 completed');
    $c->close;
    ok($bus->wait_log(qr/4095 pending request\(s\) discarded/), 'cleanup');
}
{   # a flooding client that disconnects while held back does not wedge the table
    my $c = $bus->connect;
    $c->send(map { { id => $_, method => 'noreply', params => { pad => 'x' x 50 } } } 20001 .. 26000);
    ok($bus->wait_log(qr/request id=24097 held back/, 10), 'held back');
    $c->close;
    ok($bus->wait_log(qr/4096 pending request\(s\) discarded/, 5), 'disconnect noticed while held back');
    my $d = $bus->connect;
    $d->send({ id => 'after-flood', method => 'ping' });
    is($d->read_msg(5)->{id}, 'after-flood', 'served after the flood');
    $d->close;
}
{   # stdio: a burst bigger than the pending table is answered completely, then EOF ends the daemon
    my $sb = start_bus(config => write_config(instances => 2), log_level => 'info');
    $sb->send_raw(join('', map { qq({"id":$_,"method":"ping"}\n) } 1 .. 6000));
    $sb->close_stdin;
    my @l = $sb->read_lines(6000, 30);
    is(scalar @l, 6000, 'all 6000 responses (no request lost at the pending limit)');
    is($sb->wait_exit(10), 0, 'exit 0');
}
{   # MAX_CONNECTIONS = 1024 descriptors: listener + 2 per worker + clients
    my @c;
    for (1 .. 1021) { push @c, $bus->connect }
    my $last = $c[-1];
    $last->send({ id => 'last', method => 'ping' });
    is($last->read_msg(10)->{id}, 'last', '1021st client served (1 + 2 + 1021 = 1024 fds)');
    my $x = $bus->connect;
    ok($x->is_closed(5), '1022nd connection rejected');
    ok($bus->wait_log(qr/connection limit \(MAX_CONNECTIONS=1024\) reached/), 'rejection logged');
    $_->close for splice @c, 0, 10;
    select undef, undef, undef, 0.3;
    my $y = $bus->connect;
    $y->send({ id => 'y', method => 'ping' });
    is($y->read_msg(5)->{id}, 'y', 'accepted again after others left');
    $_->close for @c, $y;
}
is($bus->stop, 0, 'exit 0');
done_testing;
