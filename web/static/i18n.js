// Strings of the pages in English and Simplified Chinese. The server picks
// the language from Accept-Language (the <html lang>); the switch's choice
// is kept in localStorage and wins over it.
const dict = {
  en: {
    loading: 'Loading…', back: 'All sales', per_night: 'per night',
    checkin: 'Check-in', nights: 'Nights', rooms_left: 'Rooms left', buy: 'Buy', cancel: 'Cancel the hold',
    'list.title': 'Flash sales', 'list.none': 'No sale is open or coming up.', 'list.open': 'On sale now',
    'list.upcoming': 'Starts {when}', 'list.sold_out': 'Sold out', 'list.failed': 'Could not load the sales.',
    'list.stay': 'Stays {from} – {to}',
    starts_in: 'Starts in {t}', ends_in: 'Ends in {t}', ended: 'This sale has ended.', days: '{n} d {t}',
    night_left: '{date}: {n} left',
    rooms: 'Rooms', tiers: 'Buy more, pay less', tier: '{n}+ rooms: {price} per night',
    amount: 'Total {amount}: {rooms} × {nights} × {unit} a night',
    'rooms_n.one': '{n} room', 'rooms_n.other': '{n} rooms', 'nights_n.one': '{n} night', 'nights_n.other': '{n} nights',
    'state.order': 'Order {id} · {date}, {nights}, {rooms} · {amount}',
    'state.waiting': 'The sale has not started yet.',
    'state.ready': 'On sale now.',
    'state.signing_in': 'Signing in…',
    'state.solving': 'Checking your browser…',
    'state.buying': 'Buying…',
    'state.queued': 'Queued: your order is being confirmed…',
    'state.held': 'Held for you. Please pay.',
    'state.pay_within': 'Pay within {t}',
    'state.paid': 'Paid. Enjoy your stay!',
    'state.expired': 'The hold expired: the room went back on sale.',
    'state.cancelled': 'You cancelled the hold.',
    'state.failed': 'The order could not be completed: {reason}',
    'state.sold_out': 'Sold out.',
    'state.ended': 'This sale has ended.',
    'state.not_eligible': 'Not eligible: {reason}',
    'state.rate_limited': 'Too many tries. Try again in {n} s.',
    'state.unavailable': 'Busy right now. Try again in {n} s.',
    'state.limit': 'You already have the rooms this sale allows.',
    'state.retry': 'That did not work ({reason}). Please try again.',
    'state.no_token': 'Sign in on the platform to buy.',
    'state.not_found': 'No such sale.',
    'state.pay_platform': 'Pay for it in the app you came from.',
    signed_in: 'Signed in as {user} (demo)',
    live: 'live', polling: 'updating every {n} s',
    'console.title': 'Operator console', 'console.token': 'Admin token', 'console.signin': 'Sign in',
    'console.signout': 'Sign out', 'console.token_hint': 'Kept in this tab\u2019s session storage only.',
    'console.bad_token': 'That token was refused.', 'console.breaker': 'Breaker',
    'console.force_open': 'Force open', 'console.force_closed': 'Force closed', 'console.force_auto': 'Automatic',
    'console.no_breaker': 'no breaker (embedded engine)', 'console.ready': 'Ready', 'console.not_ready': 'Not ready',
    'console.engine': 'engine', 'console.database': 'database', 'console.selling': 'selling from',
    'console.date': 'Night', 'console.stock': 'Stock', 'console.available': 'Available', 'console.held': 'Held',
    'console.sold': 'Sold', 'console.audit': 'Audit', 'console.balanced': 'balanced', 'console.unbalanced': 'NOT balanced',
    'console.findings': '{n} finding(s)', 'console.preheat': 'Preheat', 'console.repair': 'Repair audit',
    'console.done': '{what}: done.', 'console.error': '{what}: {msg}', 'console.updated': 'Updated {t}',
    'console.no_sales': 'No sale is open or coming up.',
    'state.paused': 'Paused by the hotel. Buying resumes here when it goes on again.',
    'state.pay_demo': 'Demo: pay here instead of the platform.',
    'state.paying': 'Paying…',
    pay_demo: 'Pay (demo)',
    'status.upcoming': 'Upcoming', 'status.active': 'On sale', 'status.paused': 'Paused', 'status.sold_out': 'Sold out', 'status.ended': 'Ended',
    'step.requested': 'requested', 'step.admitted': 'admitted', 'step.reserved': 'reserved', 'step.written': 'orders', 'step.paid': 'paid',
    'console.sales': 'Sales', 'console.filter': 'Status', 'console.all': 'All', 'console.new_sale': 'New sale', 'console.more': 'More sales',
    'console.list_public': 'This server has no admin list yet: showing the open and upcoming sales only.',
    'console.sale': 'Sale', 'console.status': 'Status', 'console.open': 'Open', 'console.left_sold': 'Left / sold', 'console.actions': 'Actions',
    'console.open_sale': 'Dashboard of {title}', 'console.back': '← All sales',
    'console.pause': 'Pause', 'console.resume': 'Resume', 'console.close': 'Close the sale',
    'console.night': 'Night', 'console.rooms': 'Rooms', 'console.add_rooms': 'Add rooms', 'console.remove_rooms': 'Take back rooms',
    'console.chart_stock': 'Stock per night', 'console.chart_purchases': 'Purchases per second',
    'console.orders_s': 'orders/s', 'console.requests_s': 'requests/s', 'console.chart_funnel': 'Funnel (since this instance started)',
    'console.chart_refusals': '429 and 503 per second', 'console.r429': '429 rate limited', 'console.r503': '503 unavailable',
    'console.chart_p99': 'Purchase p99 latency', 'console.p99_note': 'This instance, every sale, each second\u2019s requests.',
    'console.no_metrics': 'No /metrics on this listener (FLASHSALE_METRICS_ADDR): figures from the admin API only.',
    'console.no_such_sale': 'No sale {id}.', 'console.nights_caption': 'Rooms per night',
    'console.stock_in_use': 'only {n} rooms of {date} are free to take back; the others are held or sold.',
    'console.err_ended': 'the sale has ended.', 'console.err_paused': 'the sale is paused.',
    'console.not_on_server': 'this server does not offer that action yet.',
    'console.confirm': 'Confirm', 'console.created': 'Sale \u201c{title}\u201d created.',
    'console.ask_pause': 'Pause \u201c{title}\u201d? Tokens and purchases are refused until you resume; holds and payments go on.',
    'console.ask_resume': 'Resume \u201c{title}\u201d? Guests can buy again at once.',
    'console.ask_close': 'Close \u201c{title}\u201d now? It ends at once for every guest; this cannot be undone.',
    'console.ask_add': 'Add {n} room(s) to {date} of \u201c{title}\u201d? They are on sale at once.',
    'console.ask_remove': 'Take back {n} unsold room(s) from {date} of \u201c{title}\u201d?',
    'f.title': 'Title', 'f.hotel': 'Hotel', 'f.room_type': 'Room type', 'f.time_zone': 'Hotel’s time zone', 'f.time_zone_hint': 'An IANA name such as Asia/Shanghai: the nights are dates there.', 'f.nights': 'Nights and rooms per night',
    'f.add_night': 'Add a night', 'f.night_date': 'Night', 'f.night_stock': 'Rooms', 'f.remove_night': 'Remove night {n}',
    'f.prices': 'Price per room-night, in minor units (fen, cents)', 'f.price': 'Sale price', 'f.original_price': 'Original price',
    'f.price_tiers': 'Price tiers: rooms:price, comma-separated (empty = none)',
    'v.tiers_format': 'Write each tier as rooms:price, for example 2:34900, 3:32900.',
    'v.tiers_count': 'At most {max} tiers.',
    'v.tiers_rooms': 'Tier {i}: rooms must be more than the tier before (at least 2) and at most the rooms per guest ({max}).',
    'v.tiers_price': 'Tier {i}: the price must be below the one before it ({price}).',
    'f.currency': 'Currency', 'f.window': 'Sale window (your time zone)', 'f.starts_at': 'Starts', 'f.ends_at': 'Ends',
    'f.rules': 'Rules', 'f.per_user_limit': 'Rooms per guest', 'f.hold_seconds': 'Payment window (seconds)',
    'f.purchase_token': 'One-time purchase token', 'f.challenge': 'Proof-of-work difficulty (bits, 0 = none)',
    'f.eligibility': 'Who may buy', 'f.min_tier': 'Lowest tier', 'f.anyone': 'Anyone',
    'f.min_stays': 'Nights stayed in the last 30 days (at least)', 'f.channels': 'Channels (comma-separated; empty = all)',
    'f.limits': 'Rate limits (empty = the instance\u2019s; N/s, N/m or N/h with an optional ,BURST; off)',
    'f.per_sale': 'Per sale', 'f.per_user': 'Per guest', 'f.per_ip': 'Per address', 'f.create': 'Create the sale', 'f.cancel': 'Cancel',
    'f.waiting_room': 'Waiting room (all empty = none)', 'f.waiting_room_hint': 'Guests queue and are let in a few at a time; those who join before the start are shuffled fairly at the start.',
    'f.prequeue_minutes': 'The queue opens before the start (minutes)', 'f.admit_per_second': 'Guests let in per second (0 = from the stock and the payment window)',
    'f.admission_seconds': 'Seconds a guest let in has to start buying',
    'v.required': 'Required, at most {max} bytes (about 66 Chinese characters).', 'v.nights_count': 'List 1 to 366 nights.',
    'v.night_date': 'A date is required.', 'v.night_order': 'Nights go in increasing date order, each once.',
    'v.night_stock': 'Rooms: a whole number from 0 to 1000000.', 'v.money': 'A whole number of minor units, 0 or more.', 'v.time_zone': 'Not a time zone this browser knows: pick one from the list, such as Asia/Shanghai.',
    'v.currency': 'A three-letter code such as CNY.', 'v.time': 'A date and time is required.',
    'v.ends_after': 'The end must be after the start.', 'v.range': 'A whole number from {lo} to {hi}.',
    'v.challenge_token': 'A proof of work needs the one-time purchase token.', 'v.channels_count': 'At most 16 channels.',
    'v.channel': 'Channels are 1 to 64 of a-z, 0-9 and . _ -', 'v.channel_repeat': 'A channel is listed twice.',
    'v.admit_rate': '0, or a number from 0.1 to 100000.',
    'v.rate': 'Like 5/s, 300/m,600 or off (N from 1 to 1000000).', 'v.summary': 'The sale was not created: {n} problem(s).',
    'v.server': 'The server refused it: {msg}',
    'f.description': 'Description (optional)', 'v.description': 'At most {max} bytes.',
    'console.test': 'test', 'console.test_hint': 'A test sale: hidden from guests\u2019 list, deletable with its orders.',
    'console.waiting_room': 'Waiting room: opens {m} min before the start · {rate} · {a} s to start buying',
    'console.rate': '{n} let in per second', 'console.rate_derived': 'let in as the stock allows',
    'console.revision': 'revision {n}', 'console.edit': 'Edit the sale', 'console.delete': 'Delete test sale',
    'console.ask_delete': 'Delete the test sale \u201c{title}\u201d with all its orders and its change log? This cannot be undone.',
    'console.deleted': 'Test sale \u201c{title}\u201d deleted.',
    'console.changes': 'Change log', 'console.changes_caption': 'Changes, newest first',
    'console.when': 'When', 'console.kind': 'Change', 'console.revision_col': 'Revision', 'console.detail': 'Detail',
    'console.no_changes': 'No changes yet.',
    'change.edit': 'Edit', 'change.pause': 'Pause', 'change.resume': 'Resume', 'change.close': 'Close', 'change.stock': 'Rooms',
    'console.orders': 'Orders', 'console.orders_caption': 'Orders, newest first', 'console.refresh': 'Refresh',
    'console.csv': 'Download CSV', 'console.csv_busy': 'Preparing the CSV\u2026',
    'console.csv_done': 'CSV of {n} order(s) downloaded.', 'console.csv_cut': 'The CSV was cut short after {n} order(s): download it again.',
    'console.network': 'the server did not answer.', 'console.more_orders': 'More orders',
    'console.orders_more': '{n} order(s) shown; more follow.', 'console.orders_all': '{n} order(s) shown, all of them.',
    'console.no_orders': 'No orders.', 'console.order': 'Order', 'console.guest': 'Guest', 'console.stay': 'Stay',
    'console.amount': 'Amount', 'console.hold_until': 'Held until / payment', 'console.stay_of': '{date}, {nights} night(s), {rooms} room(s)',
    'order.held': 'Held', 'order.paid': 'Paid', 'order.expired': 'Expired', 'order.cancelled': 'Cancelled', 'order.failed': 'Failed',
    'edit.title': 'Edit the sale', 'edit.save': 'Save the changes', 'edit.summary': 'The sale was not changed: {n} problem(s).',
    'edit.nothing': 'Nothing was changed.', 'edit.saved': 'Saved: the sale is at revision {n}.',
    'edit.already_started': 'The sale has started: {field} can no longer change, since guests hold purchase tokens for it. The form now shows the sale as it is.',
    'edit.locked': 'The sale has started: only the title, description, end and rate limits can change. Guests hold purchase tokens for the other terms, so they stay as they are.',
  },
  'zh-CN': {
    loading: '加载中…', back: '全部特卖', per_night: '每晚',
    checkin: '入住日期', nights: '晚数', rooms_left: '剩余房间', buy: '立即抢购', cancel: '取消预留',
    'list.title': '限时特卖', 'list.none': '暂无进行中或即将开始的特卖。', 'list.open': '正在抢购',
    'list.upcoming': '{when} 开始', 'list.sold_out': '已售罄', 'list.failed': '无法加载特卖列表。',
    'list.stay': '入住 {from} – 离店 {to}',
    starts_in: '距开始 {t}', ends_in: '距结束 {t}', ended: '本场特卖已结束。', days: '{n} 天 {t}',
    night_left: '{date}：剩 {n} 间',
    rooms: '房间数', tiers: '多订更优惠', tier: '{n} 间起：每晚 {price}',
    amount: '合计 {amount}：{rooms} × {nights} × 每晚 {unit}',
    'rooms_n.one': '{n} 间', 'rooms_n.other': '{n} 间', 'nights_n.one': '{n} 晚', 'nights_n.other': '{n} 晚',
    'state.order': '订单 {id} · {date}，{nights}，{rooms} · {amount}',
    'state.waiting': '特卖尚未开始。',
    'state.ready': '正在抢购。',
    'state.signing_in': '登录中…',
    'state.solving': '正在验证您的浏览器…',
    'state.buying': '抢购中…',
    'state.queued': '排队中：正在确认您的订单…',
    'state.held': '已为您预留，请尽快支付。',
    'state.pay_within': '请在 {t} 内支付',
    'state.paid': '支付成功，祝您入住愉快！',
    'state.expired': '预留已过期，房间已重新开放。',
    'state.cancelled': '您已取消预留。',
    'state.failed': '订单未能完成：{reason}',
    'state.sold_out': '已售罄。',
    'state.ended': '本场特卖已结束。',
    'state.not_eligible': '不符合购买条件：{reason}',
    'state.rate_limited': '尝试次数过多，请 {n} 秒后再试。',
    'state.unavailable': '系统繁忙，请 {n} 秒后再试。',
    'state.limit': '您已达到本场特卖的购买上限。',
    'state.retry': '操作未成功（{reason}），请重试。',
    'state.no_token': '请先在平台登录后再购买。',
    'state.not_found': '没有这场特卖。',
    'state.pay_platform': '请回到您来的应用完成支付。',
    signed_in: '已登录：{user}（演示）',
    live: '实时', polling: '每 {n} 秒更新',
    'console.title': '运营控制台', 'console.token': '管理令牌', 'console.signin': '登录',
    'console.signout': '退出', 'console.token_hint': '仅保存在此标签页的会话存储中。',
    'console.bad_token': '令牌被拒绝。', 'console.breaker': '熔断器',
    'console.force_open': '强制打开', 'console.force_closed': '强制关闭', 'console.force_auto': '自动',
    'console.no_breaker': '无熔断器（内置引擎）', 'console.ready': '就绪', 'console.not_ready': '未就绪',
    'console.engine': '库存引擎', 'console.database': '数据库', 'console.selling': '售卖来源',
    'console.date': '日期', 'console.stock': '库存', 'console.available': '可售', 'console.held': '预留',
    'console.sold': '已售', 'console.audit': '对账', 'console.balanced': '平衡', 'console.unbalanced': '不平衡',
    'console.findings': '{n} 项发现', 'console.preheat': '预热', 'console.repair': '修复对账',
    'console.done': '{what}：完成。', 'console.error': '{what}：{msg}', 'console.updated': '更新于 {t}',
    'console.no_sales': '暂无进行中或即将开始的特卖。',
    'state.paused': '酒店已暂停本场特卖，恢复后可在此继续购买。',
    'state.pay_demo': '演示模式：可在此直接支付。',
    'state.paying': '支付中…',
    pay_demo: '支付（演示）',
    'status.upcoming': '即将开始', 'status.active': '抢购中', 'status.paused': '已暂停', 'status.sold_out': '已售罄', 'status.ended': '已结束',
    'step.requested': '请求', 'step.admitted': '准入', 'step.reserved': '锁定库存', 'step.written': '订单', 'step.paid': '已支付',
    'console.sales': '特卖', 'console.filter': '状态', 'console.all': '全部', 'console.new_sale': '新建特卖', 'console.more': '更多特卖',
    'console.list_public': '此服务器尚无管理列表：仅显示进行中和即将开始的特卖。',
    'console.sale': '特卖', 'console.status': '状态', 'console.open': '打开', 'console.left_sold': '剩余 / 已售', 'console.actions': '操作',
    'console.open_sale': '{title} 的看板', 'console.back': '← 全部特卖',
    'console.pause': '暂停', 'console.resume': '恢复', 'console.close': '结束特卖',
    'console.night': '日期', 'console.rooms': '房间数', 'console.add_rooms': '增加房间', 'console.remove_rooms': '收回房间',
    'console.chart_stock': '每晚库存', 'console.chart_purchases': '每秒购买',
    'console.orders_s': '订单/秒', 'console.requests_s': '请求/秒', 'console.chart_funnel': '转化漏斗（本实例启动以来）',
    'console.chart_refusals': '每秒 429 与 503', 'console.r429': '429 限流', 'console.r503': '503 不可用',
    'console.chart_p99': '购买 p99 延迟', 'console.p99_note': '本实例、全部特卖、每秒内的请求。',
    'console.no_metrics': '此端口没有 /metrics（FLASHSALE_METRICS_ADDR）：仅显示管理接口的数据。',
    'console.no_such_sale': '没有特卖 {id}。', 'console.nights_caption': '每晚房间',
    'console.stock_in_use': '{date} 只有 {n} 间房可以收回；其余已被预留或售出。',
    'console.err_ended': '特卖已结束。', 'console.err_paused': '特卖已暂停。',
    'console.not_on_server': '此服务器尚不支持该操作。',
    'console.confirm': '确认', 'console.created': '已创建特卖“{title}”。',
    'console.ask_pause': '暂停“{title}”？恢复前将拒绝发放令牌和购买；已预留的订单和支付不受影响。',
    'console.ask_resume': '恢复“{title}”？客人可立即继续购买。',
    'console.ask_close': '立即结束“{title}”？所有客人都将无法购买，且无法撤销。',
    'console.ask_add': '为“{title}”的 {date} 增加 {n} 间房？将立即开售。',
    'console.ask_remove': '从“{title}”的 {date} 收回 {n} 间未售出的房？',
    'f.title': '标题', 'f.hotel': '酒店', 'f.room_type': '房型', 'f.time_zone': '酒店时区', 'f.time_zone_hint': 'IANA 时区名，如 Asia/Shanghai：入住日期按该时区计。', 'f.nights': '入住日期与每晚房间数',
    'f.add_night': '增加一晚', 'f.night_date': '日期', 'f.night_stock': '房间数', 'f.remove_night': '删除第 {n} 晚',
    'f.prices': '每间每晚价格，以最小货币单位（分）计', 'f.price': '特卖价', 'f.original_price': '原价',
    'f.price_tiers': '阶梯价：房间数:价格，以逗号分隔（留空 = 无）',
    'v.tiers_format': '每档写作 房间数:价格，例如 2:34900, 3:32900。',
    'v.tiers_count': '最多 {max} 档。',
    'v.tiers_rooms': '第 {i} 档：房间数须多于上一档（至少 2），且不超过每位客人的房间数（{max}）。',
    'v.tiers_price': '第 {i} 档：价格须低于上一档（{price}）。',
    'f.currency': '币种', 'f.window': '特卖时间（您的时区）', 'f.starts_at': '开始', 'f.ends_at': '结束',
    'f.rules': '规则', 'f.per_user_limit': '每位客人限购房间数', 'f.hold_seconds': '支付时限（秒）',
    'f.purchase_token': '一次性购买令牌', 'f.challenge': '工作量证明难度（位，0 为不需要）',
    'f.eligibility': '购买资格', 'f.min_tier': '最低会员等级', 'f.anyone': '不限',
    'f.min_stays': '近 30 天至少入住晚数', 'f.channels': '渠道（逗号分隔；留空为全部）',
    'f.limits': '限流（留空用实例默认；N/s、N/m 或 N/h，可加 ,突发数；off 关闭）',
    'f.per_sale': '每场特卖', 'f.per_user': '每位客人', 'f.per_ip': '每个地址', 'f.create': '创建特卖', 'f.cancel': '取消',
    'f.waiting_room': '等候室（全部留空 = 不设）', 'f.waiting_room_hint': '客人排队，每次放行几位；开售前加入的客人在开售时公平地随机排序。',
    'f.prequeue_minutes': '开售前多少分钟开始排队', 'f.admit_per_second': '每秒放行人数（0 = 按库存和付款时限计算）',
    'f.admission_seconds': '放行后须在多少秒内开始购买',
    'v.required': '必填，最多 {max} 字节（约 66 个汉字）。', 'v.nights_count': '请列出 1 到 366 晚。',
    'v.night_date': '请填写日期。', 'v.night_order': '日期须递增且不重复。',
    'v.night_stock': '房间数：0 到 1000000 的整数。', 'v.money': '以最小货币单位计的非负整数。', 'v.time_zone': '浏览器不认识这个时区：请从列表中选择，如 Asia/Shanghai。',
    'v.currency': '三个字母的代码，如 CNY。', 'v.time': '请填写日期和时间。',
    'v.ends_after': '结束时间须晚于开始时间。', 'v.range': '{lo} 到 {hi} 的整数。',
    'v.challenge_token': '工作量证明需要启用一次性购买令牌。', 'v.channels_count': '最多 16 个渠道。',
    'v.channel': '渠道名为 1 到 64 个 a-z、0-9 和 . _ - 字符。', 'v.channel_repeat': '有渠道重复。',
    'v.admit_rate': '0，或 0.1 到 100000 之间的数。',
    'v.rate': '例如 5/s、300/m,600 或 off（N 为 1 到 1000000）。', 'v.summary': '特卖未创建：{n} 个问题。',
    'v.server': '服务器拒绝：{msg}',
    'f.description': '描述（可选）', 'v.description': '最多 {max} 字节。',
    'console.test': '测试', 'console.test_hint': '测试特卖：不在客人的列表中显示，可连同订单一起删除。',
    'console.waiting_room': '等候室：开售前 {m} 分钟开放 · {rate} · 放行后 {a} 秒内开始购买',
    'console.rate': '每秒放行 {n} 位', 'console.rate_derived': '按库存放行',
    'console.revision': '第 {n} 版', 'console.edit': '编辑特卖', 'console.delete': '删除测试特卖',
    'console.ask_delete': '删除测试特卖“{title}”及其全部订单和变更记录？此操作无法撤销。',
    'console.deleted': '已删除测试特卖“{title}”。',
    'console.changes': '变更记录', 'console.changes_caption': '变更，最新的在前',
    'console.when': '时间', 'console.kind': '变更', 'console.revision_col': '版本', 'console.detail': '详情',
    'console.no_changes': '尚无变更。',
    'change.edit': '编辑', 'change.pause': '暂停', 'change.resume': '恢复', 'change.close': '结束', 'change.stock': '房间',
    'console.orders': '订单', 'console.orders_caption': '订单，最新的在前', 'console.refresh': '刷新',
    'console.csv': '下载 CSV', 'console.csv_busy': '正在生成 CSV…',
    'console.csv_done': '已下载 {n} 个订单的 CSV。', 'console.csv_cut': 'CSV 在 {n} 个订单后中断，请重新下载。',
    'console.network': '服务器没有响应。', 'console.more_orders': '更多订单',
    'console.orders_more': '已显示 {n} 个订单，还有更多。', 'console.orders_all': '已显示全部 {n} 个订单。',
    'console.no_orders': '没有订单。', 'console.order': '订单', 'console.guest': '客人', 'console.stay': '入住',
    'console.amount': '金额', 'console.hold_until': '预留至 / 支付', 'console.stay_of': '{date}，{nights} 晚，{rooms} 间',
    'order.held': '已预留', 'order.paid': '已支付', 'order.expired': '已过期', 'order.cancelled': '已取消', 'order.failed': '失败',
    'edit.title': '编辑特卖', 'edit.save': '保存修改', 'edit.summary': '特卖未修改：{n} 个问题。',
    'edit.nothing': '没有任何修改。', 'edit.saved': '已保存：特卖现为第 {n} 版。',
    'edit.already_started': '特卖已开始：{field} 不能再修改，因为客人持有按此条件签发的购买令牌。表单已显示特卖的当前内容。',
    'edit.locked': '特卖已开始：只能修改标题、描述、结束时间和限流。客人持有按其他条件签发的购买令牌，因此这些条件保持不变。',
  },
};

const KEY = 'flashsale.lang';

function stored() {
  try { return localStorage.getItem(KEY); } catch { return null; }
}

export let lang = dict[stored()] ? stored() : (dict[document.documentElement.lang] ? document.documentElement.lang : 'en');

// t returns the string for key with {name} replaced from vars.
export function t(key, vars = {}) {
  const s = (dict[lang] && dict[lang][key]) || dict.en[key] || key;
  return s.replace(/\{(\w+)\}/g, (_, k) => (k in vars ? String(vars[k]) : ''));
}

// count is n with its noun, in the plural form the language takes for n
// (key.one, key.other, as Intl.PluralRules names them).
export function count(key, n) {
  const form = `${key}.${new Intl.PluralRules(lang).select(n)}`;
  return t((dict[lang] && dict[lang][form]) || dict.en[form] ? form : `${key}.other`, { n });
}

// apply fills every [data-i18n] element and labels the switch.
export function apply() {
  document.documentElement.lang = lang;
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  const sw = document.getElementById('lang');
  if (sw) sw.textContent = lang === 'en' ? '中文' : 'English';
}

// setupSwitch wires the language button; onChange re-renders what the
// page drew itself.
export function setupSwitch(onChange) {
  apply();
  const sw = document.getElementById('lang');
  if (!sw) return;
  sw.addEventListener('click', () => {
    lang = lang === 'en' ? 'zh-CN' : 'en';
    try { localStorage.setItem(KEY, lang); } catch { /* private mode: this page only */ }
    apply();
    if (onChange) onChange();
  });
}

// money formats an amount in ISO 4217 minor units: the currency's own
// exponent (0 for JPY, 2 for CNY, 3 for KWD) is the number of fraction
// digits Intl gives it, so ¥9900 is 9,900 yen, not 99.
export function money(minor, currency) {
  let f;
  try {
    f = new Intl.NumberFormat(lang, { style: 'currency', currency });
  } catch {
    return minor + ' ' + currency; // a code Intl does not know: minor units as they are
  }
  return f.format(minor / 10 ** f.resolvedOptions().maximumFractionDigits);
}

// clock formats a duration in ms as h:mm:ss or m:ss.
export function clock(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  const pad = (n) => String(n).padStart(2, '0');
  if (d > 0) return t('days', { n: d, t: `${pad(h)}:${pad(m)}:${pad(sec)}` }); // not "167:56:15"
  return h > 0 ? `${h}:${pad(m)}:${pad(sec)}` : `${m}:${pad(sec)}`;
}
