-- Headless Neovim with the plugin (editors/nvim) as a user sets it up: setup(), open
-- model.py, :TensorVizTrust, :TensorVizOpen (the URL it opens), the statusline while it
-- captures, :checkhealth tensorviz, a second capture and :TensorVizDiff, then a hanging
-- capture ended by :TensorVizCancel. Results go to $TV_OUT.
local out_path = assert(os.getenv("TV_OUT"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
vim.opt.rtp:prepend(assert(os.getenv("TV_PLUGIN")))
local result = { messages = {}, statuslines = {}, commands = {} }

local function finish(err)
  result.error = err
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(5000, function() return #vim.lsp.get_clients() == 0 end, 50)
  local tmp = out_path .. ".tmp"
  local fh = assert(io.open(tmp, "w"))
  fh:write(vim.json.encode(result))
  fh:close()
  os.rename(tmp, out_path)
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  vim.ui.open = function(url)
    result.url = result.url or url
    result.opened = (result.opened or 0) + 1
    return { wait = function() return { code = 0 } end }, nil
  end
  local said = {}
  result.notified = {}
  vim.notify = function(msg) table.insert(result.notified, msg) end
  vim.lsp.handlers["window/showMessage"] = function(_, params)
    table.insert(result.messages, params.message)
    said[#said + 1] = { message = params.message, at = vim.uv.hrtime() }
  end
  -- (-u NONE leaves filetype detection off; a user's config has it on.)
  vim.cmd("filetype on")
  local tv = require("tensorviz")
  tv.setup({ cmd = cmd, settings = { captureTimeout = 120 }, keymaps = false })
  for name, _ in pairs(vim.api.nvim_get_commands({})) do
    if name:match("^TensorViz") then table.insert(result.commands, name) end
  end
  table.sort(result.commands)
  -- The statusline, sampled as a redraw would read it.
  local sampler = vim.uv.new_timer()
  sampler:start(0, 50, vim.schedule_wrap(function()
    local s = tv.statusline()
    if s ~= "" and result.statuslines[#result.statuslines] ~= s then table.insert(result.statuslines, s) end
  end))

  vim.cmd.edit(ws .. "/model.py")
  local bufnr = vim.api.nvim_get_current_buf()
  assert(vim.wait(60000, function()
    local c = vim.lsp.get_clients({ name = "tensorviz", bufnr = bufnr })[1]
    return c ~= nil and c.initialized
  end, 50), "the plugin did not start the server")
  local client = vim.lsp.get_clients({ name = "tensorviz", bufnr = bufnr })[1]
  result.server = client.server_info

  vim.cmd("TensorVizTrust")
  assert(vim.wait(30000, function()
    return vim.iter(result.messages):any(function(m) return m:find("is trusted", 1, true) ~= nil end)
  end, 50), "TensorVizTrust said nothing")

  -- The cursor inside `net`: the lens above it is the one :TensorVizOpen runs.
  vim.api.nvim_win_set_cursor(0, { 6, 4 })
  vim.cmd("TensorVizOpen")
  assert(vim.wait(100000, function() return result.url ~= nil end, 100), "the viewer URL never came")
  assert(vim.wait(10000, function() return tv.statusline() == "" end, 50), "the statusline kept a finished capture")

  vim.cmd("checkhealth tensorviz")
  result.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  vim.cmd("tabclose")
  vim.cmd.buffer(bufnr)

  -- A second capture of the profile, and its diff against the first.
  vim.cmd("TensorVizOpen")
  assert(vim.wait(100000, function() return (result.opened or 0) >= 2 end, 100), "the second Open as Graph opened nothing")
  vim.cmd("TensorVizDiff jax_example")
  assert(vim.wait(60000, function() return tv.last_diff ~= nil end, 100), ":TensorVizDiff showed nothing")
  result.diff = tv.last_diff
  result.diff_buffer = vim.api.nvim_buf_get_name(0)
  vim.cmd("close")

  -- A capture that hangs (its trace sleeps), cancelled.
  vim.cmd.edit(ws .. "/slow.py")
  local slow = vim.api.nvim_get_current_buf()
  assert(vim.wait(30000, function() return #vim.lsp.get_clients({ name = "tensorviz", bufnr = slow }) > 0 end, 50))
  vim.api.nvim_win_set_cursor(0, { 7, 4 })
  vim.cmd("TensorVizOpen")
  assert(vim.wait(60000, function() return tv.statusline():find("tracing", 1, true) ~= nil end, 50),
    "the hanging capture never reached its trace: " .. vim.inspect(result.statuslines))
  vim.wait(2500) -- long enough for the stage's elapsed seconds to show (a tick each second)
  local before = #said
  local t0 = vim.uv.hrtime()
  vim.cmd("TensorVizCancel")
  -- Issue 30: the hanging capture ends within 1 s of :TensorVizCancel (the wait's bound).
  assert(vim.wait(1000, function()
    for i = before + 1, #said do
      if said[i].message:find("cancelled", 1, true) then
        result.cancelled = { message = said[i].message, seconds = (said[i].at - t0) / 1e9 }
        return true
      end
    end
    return false
  end, 10), "no capture was cancelled within 1 s of :TensorVizCancel")
  assert(vim.wait(5000, function() return tv.statusline() == "" end, 20), "the statusline kept the cancelled capture")
  sampler:stop()
end)
finish(not ok and tostring(err) or nil)
